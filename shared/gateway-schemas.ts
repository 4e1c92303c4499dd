/**
 * Wire schemas of the gateway's money routes (DESIGN §7): what the routes validate with, what the
 * client library and the OpenAPI document are built from. Runtime-neutral: no `node:` imports.
 */
import { z } from "zod";
import { WEI_PER_UNIT } from "./constants.ts";
import { addressSchema } from "./enclave-ops.ts";

/** Printable ASCII without spaces, 1–128 characters: unique per agent and operation kind. */
export const idempotencyKeySchema = z
  .string({ error: "idempotency_key must be a string" })
  .min(1, "idempotency_key must not be empty")
  .max(128, "idempotency_key must be at most 128 characters")
  .regex(/^[\x21-\x7e]+$/, "idempotency_key must be printable ASCII without spaces");

const MAX_UINT256 = (1n << 256n) - 1n;

/**
 * A positive amount of 6-decimal units as a plain decimal string: no sign, exponent, fraction,
 * leading zero or whitespace, and small enough that its wei value fits a uint256.
 */
export const unitsAmountSchema = z
  .string({ error: "amount must be a string of 6-decimal units" })
  .regex(
    /^[1-9][0-9]{0,77}$/,
    "amount must be a positive whole number of 6-decimal units, as a decimal string",
  )
  // Refinements run even when the pattern failed: only a string of digits reaches BigInt.
  .refine(
    (value) => !/^[0-9]+$/.test(value) || BigInt(value) * WEI_PER_UNIT <= MAX_UINT256,
    "amount is too large",
  );

export const faucetRequestSchema = z.strictObject({ idempotency_key: idempotencyKeySchema });
export type FaucetRequest = z.infer<typeof faucetRequestSchema>;

export const transferRequestSchema = z.strictObject({
  idempotency_key: idempotencyKeySchema,
  to: addressSchema,
  amount: unitsAmountSchema,
});
export type TransferRequest = z.infer<typeof transferRequestSchema>;

export const ACTION_KINDS = ["faucet", "transfer", "x402"] as const;
export const ACTION_STATUSES = [
  "requested",
  "signed",
  "submitted",
  "confirmed",
  "failed",
  "reverted",
] as const;
export type ActionStatus = (typeof ACTION_STATUSES)[number];
/** Statuses after which an action never changes again. */
export const TERMINAL_ACTION_STATUSES: readonly ActionStatus[] = ["confirmed", "failed", "reverted"];

/** DESIGN §7: the action, as faucet, transfers and GET /actions/{id} answer it. */
export const actionSchema = z.object({
  action_id: z.string().uuid(),
  kind: z.enum(ACTION_KINDS),
  status: z.enum(ACTION_STATUSES),
  tx_hash: z.string().nullable(),
  /** 6-decimal units. */
  amount: z.string().nullable(),
  to: z.string().nullable(),
  /** What the mined transaction cost its sender in fees, in wei; null until mined. */
  fee_wei: z.string().nullable(),
  /** Why a failed action failed (an error code of the gateway), else null. */
  error_code: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ActionView = z.infer<typeof actionSchema>;
