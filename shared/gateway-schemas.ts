/**
 * Wire schemas of the gateway's money routes (docs/api.md): what the routes validate with, what the
 * client library and the OpenAPI document are built from. Runtime-neutral: no `node:` imports.
 */
import * as z from "zod";
import { ACTION_KINDS, ACTION_STATUSES } from "./action-status.ts";
import { CAPABILITIES, RPC_MAX_BATCH, RPC_MAX_BATCH_BYTES, WEI_PER_UNIT } from "./constants.ts";
import { addressSchema } from "./enclave-ops.ts";
import { ERROR_STATUS, type ErrorCode } from "./error-codes.ts";
import {
  IDEMPOTENCY_KEY_MAX_LENGTH,
  IDEMPOTENCY_KEY_MESSAGES,
  IDEMPOTENCY_KEY_PATTERN,
} from "./idempotency-key.ts";

/** Printable ASCII without spaces, 1–128 characters: unique per agent and operation kind. */
export const idempotencyKeySchema = z
  .string({ error: "idempotency_key must be a string" })
  .min(1, IDEMPOTENCY_KEY_MESSAGES.empty)
  .max(IDEMPOTENCY_KEY_MAX_LENGTH, IDEMPOTENCY_KEY_MESSAGES.tooLong)
  .regex(IDEMPOTENCY_KEY_PATTERN, IDEMPOTENCY_KEY_MESSAGES.pattern);

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

export {
  ACTION_KINDS,
  ACTION_STATUSES,
  type ActionStatus,
  isTerminalAction,
  TERMINAL_ACTION_STATUSES,
} from "./action-status.ts";

/** The action, as faucet, transfers and GET /actions/{id} answer it. */
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
  /**
   * While the action is `submitted`: the node's words for its last broadcast, when that was not
   * accepted (a timeout, "nonce too low", a refusal). Still in flight: only the chain ends it.
   */
  last_broadcast_error: z.string().nullable(),
  /**
   * For an action that ended `failed` because a filler from the agent's own wallet took its nonce:
   * that filler's action (kind `filler`, with its fee), else null.
   */
  replaced_by: z.string().nullable(),
  /**
   * The spending-policy rule that held the action (docs/agents.md#holds), kept once it was approved,
   * rejected or expired, or the rule that refused it (`policy_denied`); null otherwise.
   */
  rule: z.string().nullable(),
  /** While `held`: when it ends `expired` unless an operator approves or rejects it first. */
  expires_at: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type ActionView = z.infer<typeof actionSchema>;

/** A 32-byte nonce as hex, with or without `0x`, either case (normalised to lowercase `0x` form). */
export const x402NonceSchema = z
  .string({ error: "nonce must be a string" })
  .regex(/^(0x)?[0-9a-fA-F]{64}$/, "nonce must be 32 bytes of hex (64 hex digits, 0x optional)");

/**
 * Bounds of what a quote may carry into an authorization (the envelope copies `resource`, the
 * chosen `accepts` entry and `extensions` as sent). Far above what an honest x402 quote holds (the
 * official packages write a short description, entries of a few hundred bytes, extensions such as
 * bazaar's schemas or sign-in-with-x's message of a few KiB), far below an attacker's 32 KiB.
 */
export const X402_QUOTE_BOUNDS = {
  urlChars: 2_048,
  mimeTypeChars: 256,
  descriptionChars: 2_048,
  /** The whole `resource` object as JSON (url, mimeType, description and any other field). */
  resourceBytes: 6 * 1024,
  accepts: 16,
  /** Each `accepts` entry as JSON. */
  acceptsEntryBytes: 4 * 1024,
  extensionsBytes: 16 * 1024,
} as const;

const jsonBytes = (value: unknown): number => new TextEncoder().encode(JSON.stringify(value)).byteLength;

/**
 * The 402 quote as the agent received it (docs/x402.md): only its shape and size are
 * checked here. Which entry of `accepts` can be paid is the route's decision
 * (origin/x402/payer/authorize-requirement.ts), and what is copied into the envelope is the quote as
 * sent, keys in their order.
 */
export const x402PaymentRequiredSchema = z.looseObject({
  x402Version: z.number({ error: "payment_required.x402Version must be a number" }).int(),
  resource: z
    .looseObject({
      url: z
        .string({ error: "payment_required.resource.url is required" })
        .min(1)
        .max(X402_QUOTE_BOUNDS.urlChars),
      // Null is absent, as the official packages' schemas take it (a seller may write either).
      mimeType: z.string().max(X402_QUOTE_BOUNDS.mimeTypeChars).nullish(),
      description: z.string().max(X402_QUOTE_BOUNDS.descriptionChars).nullish(),
    })
    .refine(
      (resource) => jsonBytes(resource) <= X402_QUOTE_BOUNDS.resourceBytes,
      `payment_required.resource must be at most ${X402_QUOTE_BOUNDS.resourceBytes} bytes as JSON`,
    )
    .describe(`at most ${X402_QUOTE_BOUNDS.resourceBytes} bytes as JSON`),
  accepts: z
    .array(
      z
        .looseObject({})
        .refine(
          (entry) => jsonBytes(entry) <= X402_QUOTE_BOUNDS.acceptsEntryBytes,
          `each payment_required.accepts entry must be at most ${X402_QUOTE_BOUNDS.acceptsEntryBytes} bytes as JSON`,
        )
        .describe(`a requirement, at most ${X402_QUOTE_BOUNDS.acceptsEntryBytes} bytes as JSON`),
      { error: "payment_required.accepts must be an array of requirements" },
    )
    .min(1, "payment_required.accepts must not be empty")
    .max(
      X402_QUOTE_BOUNDS.accepts,
      `payment_required.accepts must have at most ${X402_QUOTE_BOUNDS.accepts} entries`,
    ),
  extensions: z
    .record(z.string(), z.unknown())
    .refine(
      (extensions) => jsonBytes(extensions) <= X402_QUOTE_BOUNDS.extensionsBytes,
      `payment_required.extensions must be at most ${X402_QUOTE_BOUNDS.extensionsBytes} bytes as JSON`,
    )
    .describe(`at most ${X402_QUOTE_BOUNDS.extensionsBytes} bytes as JSON`)
    .nullish(),
});
export type X402PaymentRequired = z.infer<typeof x402PaymentRequiredSchema>;

/** POST /agent/v1/x402/authorize. */
export const x402AuthorizeRequestSchema = z.strictObject({
  payment_required: x402PaymentRequiredSchema,
  /** Absent: derived from the idempotency key (docs/x402.md#payment-identifiers). */
  nonce: x402NonceSchema.optional(),
  idempotency_key: idempotencyKeySchema.optional(),
});
export type X402AuthorizeRequest = z.infer<typeof x402AuthorizeRequestSchema>;

/**
 * The answer of POST /agent/v1/x402/authorize. `payment_signature` is the exact value of
 * the `PAYMENT-SIGNATURE` header (Base64 of `payment_payload` as JSON); `valid_before` is the
 * authorization's validBefore (unix seconds, as in the payload).
 */
export const x402AuthorizeResponseSchema = z.object({
  action_id: z.string().uuid(),
  payment_signature: z.string(),
  payment_payload: z.object({
    x402Version: z.literal(2),
    payload: z.object({
      authorization: z.object({
        from: z.string(),
        to: z.string(),
        value: z.string(),
        validAfter: z.string(),
        validBefore: z.string(),
        nonce: z.string(),
      }),
      signature: z.string(),
    }),
    extensions: z.record(z.string(), z.unknown()).optional(),
    resource: z.looseObject({ url: z.string() }),
    accepted: z.looseObject({}),
  }),
  valid_before: z.string(),
});
export type X402AuthorizeResponse = z.infer<typeof x402AuthorizeResponseSchema>;

// ─── Responses of the read routes and registration (docs/api.md) ──────────────────────────────

const decimalString = z
  .string()
  .regex(/^(0|[1-9][0-9]*)$/)
  .describe("a non-negative integer, as a decimal string");

/** GET {base}/agent/v1/network: the contract an agent adapts to. */
export const networkResponseSchema = z.object({
  api_version: z.literal("v1"),
  chain: z.object({
    chain_id: z.literal(77),
    caip2: z.literal("eip155:77"),
    native_token: z.object({ symbol: z.literal("USDC"), decimals: z.literal(6) }),
    /** null while the chain does not answer. */
    latest_block: decimalString.nullable(),
  }),
  agent: z.object({
    agent_id: z.string(),
    assigned_wallet: z.string(),
    capabilities: z.array(z.enum(CAPABILITIES)),
    /** The agent has a spending policy: GET /agent/v1/policy shows it and what remains of it. */
    spending_policy: z.boolean(),
  }),
  rpc: z.object({
    allowed_methods: z.array(z.string()),
    max_batch: z.number().int(),
    max_batch_bytes: z.number().int(),
    max_response_bytes: z.number().int(),
  }),
  limits: z.object({
    rpc_in_flight: z.object({ per_agent: z.number().int(), per_node: z.number().int() }),
    failed_auth_per_ip: z.object({ limit: z.number().int(), window_seconds: z.number().int() }),
    requests_per_agent: z.object({ limit: z.number().int(), window_seconds: z.number().int() }),
    transfer: z.object({
      per_tx_units: decimalString,
      daily_units: decimalString,
      recipient_allowlist: z.array(z.string()).nullable(),
    }),
    faucet: z.object({
      payout_units: decimalString,
      cooldown_ms: z.number().int(),
      daily_units: decimalString,
    }),
    x402: z.object({
      amount_units: decimalString.nullable(),
      pay_to: z.string().nullable(),
      max_timeout_seconds: z.number().int(),
      /** AGENT_X402_DAILY_LIMIT: authorizations one agent may have signed per UTC day (429 x402_daily_limit past it). */
      daily_limit: z.number().int(),
    }),
  }),
  features: z.object({
    faucet: z.boolean(),
    transfers: z.boolean(),
    x402: z.boolean(),
    registration: z.boolean(),
  }),
});
export type NetworkResponse = z.infer<typeof networkResponseSchema>;

/** GET {base}/agent/v1/balance: the assigned wallet's balance, in 6-decimal units and in wei. */
export const balanceResponseSchema = z.object({
  address: z.string(),
  balance: decimalString.describe("6-decimal units"),
  decimals: z.literal(6),
  symbol: z.literal("USDC"),
  balance_wei: decimalString.describe("18-decimal wei, as eth_getBalance reads it"),
  block_number: decimalString,
});
export type BalanceResponse = z.infer<typeof balanceResponseSchema>;

/** POST {base}/agent/v1/register: 201, the token shown once. */
export const registerResponseSchema = z.object({
  token: z.string(),
  agent_id: z.string(),
  assigned_wallet: z.string(),
  capabilities: z.array(z.enum(CAPABILITIES)),
  chain_id: z.literal(77),
});
export type RegisterResponse = z.infer<typeof registerResponseSchema>;

/** POST {base}/agent/v1/register takes exactly `{}` (origin/registration/request-shape.ts checks it). */
export const registerRequestSchema = z.strictObject({});

/** The one error envelope of the gateway, registration and console. */
export const errorBodySchema = z.object({
  error: z
    .object({
      code: z.enum(Object.keys(ERROR_STATUS) as [ErrorCode, ...ErrorCode[]]),
      message: z.string(),
      request_id: z.string(),
      /** Seconds to wait, on 429 answers (docs/api.md). */
      retry_after: z.number().int().optional(),
      /** Why, on funding_gate_closed and registration_unavailable. */
      reason: z.string().optional(),
      /** On limit_exceeded. */
      limit: z.string().optional(),
      limit_units: z.string().optional(),
      remaining_units: z.string().optional(),
      /**
       * On insufficient_funds: what the transfer needs (amount plus the maximum fee, rounded up) and
       * what the wallet has (less pending transfers, rounded down), in 6-decimal units; the exact
       * figures in wei beside them.
       */
      needed_units: z.string().optional(),
      available_units: z.string().optional(),
      needed_wei: z.string().optional(),
      available_wei: z.string().optional(),
    })
    .catchall(z.union([z.string(), z.number()])),
});

// ─── JSON-RPC (POST {base}/agent/v1/rpc; origin/gateway/rpc.ts reads it field by field) ─────

const jsonRpcId = z.union([z.string(), z.number(), z.null()]);
export const jsonRpcRequestSchema = z.object({
  jsonrpc: z.literal("2.0"),
  id: jsonRpcId.optional(),
  method: z.string(),
  params: z.array(z.unknown()).optional(),
});
/** A batch: at most RPC_MAX_BATCH requests and RPC_MAX_BATCH_BYTES in all (docs/api.md#json-rpc-on-agentv1rpc). */
export const jsonRpcBatchSchema = z
  .array(jsonRpcRequestSchema)
  .min(1)
  .max(RPC_MAX_BATCH)
  .describe(
    `a batch of at most ${RPC_MAX_BATCH} requests and ${RPC_MAX_BATCH_BYTES} bytes in all (a larger body is 413); an empty or larger batch is answered one JSON-RPC error -32600`,
  );
export const jsonRpcResponseSchema = z.object({
  jsonrpc: z.literal("2.0"),
  id: jsonRpcId,
  result: z.unknown().optional(),
  error: z
    .object({
      code: z.number().int(),
      message: z.string(),
      /** On a refused method: the allowlist and the batch limits. */
      data: z.unknown().optional(),
    })
    .optional(),
});
