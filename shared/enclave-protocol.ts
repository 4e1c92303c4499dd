/**
 * Envelopes of the enclave socket protocol: hello, request, response, the closed list
 * of ops and error codes, and which capability tier each privileged op needs. Both the enclave and
 * the origin's signer client parse with these schemas. Runtime-neutral: no `node:` imports.
 */
import { z } from "zod";
import { ENCLAVE_PROTOCOL } from "./constants.ts";

export const ENCLAVE_WIRE_VERSION = 1;

/** The enclave's error codes, a closed list; nothing else travels in `error.code`. */
export const ENCLAVE_ERROR_CODES = [
  "malformed",
  "wrong_profile",
  "key_purpose_mismatch",
  "capability_rejected",
  "cap_exceeded",
  "not_configured",
  "seal_failed",
] as const;
export type EnclaveErrorCode = (typeof ENCLAVE_ERROR_CODES)[number];

/**
 * Which sealed bound refused a signing request: an optional, machine-readable `detail` beside the
 * error code, so the origin answers each refusal with its own gateway error by a switch over
 * this closed list rather than by matching reason text. Reasons stay free text for people.
 */
export const REFUSAL_DETAILS = [
  /** Transfers: the sealed per-transaction limit (value plus the maximum fee). */
  "per_transaction",
  /** Transfers: the sealed per-key daily limit. */
  "daily",
  /** Transfers and payouts: the allowlist, or the operator pool as recipient. */
  "recipient",
  "chain",
  "gas_limit",
  "fee_ceiling",
  "faucet_budget",
  /** A payout of another value than the sealed payout. */
  "faucet_payout",
  /** A payout to an address that is not one of this enclave's agent keys. */
  "faucet_recipient",
  "faucet_cooldown",
  /** The sealed per-recipient units of one UTC day. */
  "faucet_daily",
  /** The operator pool as an x402 payer. */
  "x402_payer",
  "x402_amount",
  "x402_pay_to",
  /** An empty, expired or too long validity window, or one inside the sealed margin. */
  "x402_validity",
  /** The sealed per-key count of x402 authorizations of one UTC day. */
  "x402_daily",
  /** A settlement whose authorization signature is malformed or not by `from`. */
  "settlement_signature",
  /** A settlement outside its authorization's validity window (with the sealed margin). */
  "settlement_window",
  /** The key's address is not the `from` the caller named (the identity's wallet, the treasury). */
  "key_binding",
  /**
   * The settler's sealed fee budget of one UTC day: the maximum fees of its settlements and
   * fillers signed that day.
   */
  "settler_fee_budget",
  /** A filler at a nonce the enclave signed no transaction of this key at (or no longer remembers). */
  "filler_nonce",
  /** A second filler at a nonce: one is signed per key and nonce. */
  "filler_repeat",
] as const;
export type RefusalDetail = (typeof REFUSAL_DETAILS)[number];

/**
 * Ops that need a capability, with their tier (docs/enclave.md, "Keys and where production keeps them"). The
 * policy tier is held apart from the admin key the origin keeps for key-pool refills: a compromised origin
 * must not be able to raise limits or redirect the faucet.
 */
export const PRIVILEGED_OP_SCOPE = {
  generate_keys: "admin",
  export_backup: "admin",
  configure_treasury: "policy",
  configure_policy: "policy",
  configure_settler: "policy",
  restore_backup: "recovery",
  load_recovery_key: "recovery",
} as const;
export type PrivilegedOp = keyof typeof PRIVILEGED_OP_SCOPE;
export const PRIVILEGED_OPS = Object.keys(PRIVILEGED_OP_SCOPE) as PrivilegedOp[];

export const CAPABILITY_SCOPES = ["admin", "policy", "recovery"] as const;
export type CapabilityScope = (typeof CAPABILITY_SCOPES)[number];

/**
 * Ops without a capability. `capability_counter` needs none: counters are not
 * secret, and a holder of an authority key needs the next contiguous one to mint. `get_policy`
 * returns the sealed policy, which is no secret. `new_transport_key` and
 * `get_sealed_identity` serve restores into a new enclave: a transport key is useless
 * without a recovery capability, and the sealed identity holds public keys only.
 */
export const UNPRIVILEGED_OPS = [
  "verify_backup",
  "new_transport_key",
  "get_sealed_identity",
  "public_identity",
  "prove_identity",
  "sign_transfer",
  "sign_faucet",
  "sign_x402_authorization",
  "sign_settlement",
  "sign_filler",
  "capability_counter",
  "get_policy",
] as const;
export type UnprivilegedOp = (typeof UNPRIVILEGED_OPS)[number];

export const ENCLAVE_OPS = [...PRIVILEGED_OPS, ...UNPRIVILEGED_OPS] as const;
export type EnclaveOp = PrivilegedOp | UnprivilegedOp;

/** True when `op` is one of the enclave's ops. */
export function isEnclaveOp(op: string): op is EnclaveOp {
  return (ENCLAVE_OPS as readonly string[]).includes(op);
}

/** True when `op` needs a capability. */
export function isPrivilegedOp(op: string): op is PrivilegedOp {
  return Object.hasOwn(PRIVILEGED_OP_SCOPE, op);
}

export const helloSchema = z.object({
  v: z.literal(ENCLAVE_WIRE_VERSION),
  protocol: z.string(),
  profile: z.string(),
});
export type Hello = z.infer<typeof helloSchema>;

/** The hello each side sends first, before any request. */
export function makeHello(profile: string): Hello {
  return { v: ENCLAVE_WIRE_VERSION, protocol: ENCLAVE_PROTOCOL, profile };
}

/** Request ids: a non-negative integer or a short string, echoed in the response. */
export const requestIdSchema = z.union([z.number().int().nonnegative(), z.string().min(1).max(128)]);
export type RequestId = z.infer<typeof requestIdSchema>;

export const requestSchema = z.object({
  v: z.literal(ENCLAVE_WIRE_VERSION),
  id: requestIdSchema,
  op: z.string().min(1).max(64),
  params: z.record(z.string(), z.unknown()),
  cap: z.unknown().optional(),
});
export type EnclaveRequest = z.infer<typeof requestSchema>;

export const errorBodySchema = z.object({
  code: z.string(),
  reason: z.string().optional(),
  // A detail this side does not know (a newer enclave) reads as none, never as a malformed reply.
  detail: z.enum(REFUSAL_DETAILS).optional().catch(undefined),
});

export const responseSchema = z.discriminatedUnion("ok", [
  z.object({
    v: z.literal(ENCLAVE_WIRE_VERSION),
    id: requestIdSchema,
    ok: z.literal(true),
    result: z.unknown(),
  }),
  z.object({
    v: z.literal(ENCLAVE_WIRE_VERSION),
    id: requestIdSchema.nullable(),
    ok: z.literal(false),
    error: errorBodySchema,
  }),
]);
export type EnclaveResponse = z.infer<typeof responseSchema>;

export type EnclaveFailure = { code: EnclaveErrorCode; reason: string; detail?: RefusalDetail };
