/**
 * Envelopes of the enclave socket protocol: hello, request, response, the closed list
 * of ops and error codes, and which capability tier each privileged op needs. Both the enclave and
 * the origin's signer client parse with these schemas. Runtime-neutral: no `node:` imports.
 */
import * as z from "zod";
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

/*
 * Which sealed bound refused a signing request: an optional, machine-readable `detail` beside the
 * error code, so the origin answers each refusal with its own gateway error by a switch over a
 * closed list rather than by matching reason text. Reasons stay free text for people. The details
 * are grouped by the domain of the bound; a signing op is refused only with the groups of the
 * bounds it checks, so each domain switches over its own groups.
 */

/** An agent key's transfer limits (a filler of an agent key counts against `daily` too). */
export const TRANSFER_REFUSAL_DETAILS = [
  /** The sealed per-transaction limit (value plus the maximum fee). */
  "per_transaction",
  /** The sealed per-key daily limit. */
  "daily",
] as const;
export type TransferRefusalDetail = (typeof TRANSFER_REFUSAL_DETAILS)[number];

/** The bounds of any transaction the enclave signs (transfers and payouts check all four). */
export const TRANSACTION_REFUSAL_DETAILS = [
  /** Transfers and payouts: the allowlist, or the operator pool as recipient. */
  "recipient",
  "chain",
  "gas_limit",
  "fee_ceiling",
] as const;
export type TransactionRefusalDetail = (typeof TRANSACTION_REFUSAL_DETAILS)[number];

/** The treasury's sealed budget and payout terms (sign_faucet; a treasury filler counts its budget). */
export const FAUCET_REFUSAL_DETAILS = [
  "faucet_budget",
  /** A payout of another value than the sealed payout. */
  "faucet_payout",
  /** A payout to an address that is not one of this enclave's agent keys. */
  "faucet_recipient",
  "faucet_cooldown",
  /** The sealed per-recipient units of one UTC day. */
  "faucet_daily",
] as const;
export type FaucetRefusalDetail = (typeof FAUCET_REFUSAL_DETAILS)[number];

/**
 * The sealed x402 terms of an authorization (sign_x402_authorization; sign_settlement checks the
 * payer, amount and payTo of the authorization it settles against the same terms).
 */
export const X402_AUTHORIZATION_REFUSAL_DETAILS = [
  /** The operator pool as an x402 payer. */
  "x402_payer",
  "x402_amount",
  "x402_pay_to",
  /** An empty, expired or too long validity window, or one inside the sealed margin. */
  "x402_validity",
  /** The sealed per-key count of x402 authorizations of one UTC day. */
  "x402_daily",
  /**
   * The node's sealed x402 ceiling: a payment that is not the sealed pair, over the most one
   * payment may be, or to a payee off the node's list.
   */
  "x402_ceiling",
] as const;
export type X402AuthorizationRefusalDetail = (typeof X402_AUTHORIZATION_REFUSAL_DETAILS)[number];

/** A settlement's own bounds (sign_settlement; a settler filler counts the fee budget too). */
export const SETTLEMENT_REFUSAL_DETAILS = [
  /** A settlement whose authorization signature is malformed or not by `from`. */
  "settlement_signature",
  /** A settlement outside its authorization's validity window (with the sealed margin). */
  "settlement_window",
  /**
   * The settler's sealed fee budget of one UTC day: the maximum fees of its settlements and
   * fillers signed that day.
   */
  "settler_fee_budget",
] as const;
export type SettlementRefusalDetail = (typeof SETTLEMENT_REFUSAL_DETAILS)[number];

/** What the payee key signs (sign_x402_offer, sign_x402_receipt; docs/security.md#offers-and-receipts). */
export const OFFER_RECEIPT_REFUSAL_DETAILS = [
  /** An offer whose terms are not the node's sealed x402 terms, or valid longer than they allow. */
  "offer_terms",
  /** A receipt for a transaction the settler key did not sign here, or not to the payee by that payer. */
  "receipt_settlement",
] as const;
export type OfferReceiptRefusalDetail = (typeof OFFER_RECEIPT_REFUSAL_DETAILS)[number];

/** The nonce record's bounds on fillers (sign_filler). */
export const FILLER_REFUSAL_DETAILS = [
  /** A filler at a nonce the enclave signed no transaction of this key at (or no longer remembers). */
  "filler_nonce",
  /** A second filler at a nonce: one is signed per key and nonce. */
  "filler_repeat",
] as const;
export type FillerRefusalDetail = (typeof FILLER_REFUSAL_DETAILS)[number];

/**
 * An agent key's own spending policy, re-checked on every signature of that key
 * (docs/enclave.md#agent-policies-operator-keys-and-approvals); `rule` beside the detail names the
 * policy's field that decided (`transfers.daily_units`, `node.frozen`).
 */
export const AGENT_POLICY_REFUSAL_DETAILS = [
  /** The policy (or the frozen node) refuses the request outright. */
  "policy_denied",
  /** The request needs an operator's approval of this very action first (approve_held). */
  "policy_held",
] as const;
export type AgentPolicyRefusalDetail = (typeof AGENT_POLICY_REFUSAL_DETAILS)[number];

/**
 * An operator approval, on the ops that change agent policies, the node's freeze or held actions
 * (`capability_rejected` with one of these, so the caller knows which part to fix).
 */
export const OPERATOR_REFUSAL_DETAILS = [
  /** The change loosens, unfreezes or approves, and carries no operator approval. */
  "operator_required",
  /** No enrolled key of that id, or its signature is not over this very change. */
  "operator_signature",
  /** The approval's counter is not above the last accepted one of its key. */
  "operator_replay",
  /** The approval has expired, or expires too far ahead of the enclave's clock. */
  "operator_expired",
  /**
   * An operator key's approval of a policy change, signed over another policy than the one the
   * enclave holds now (it changed since: the agent froze or tightened it); or an unfreeze's (either
   * kind), signed over another freeze than the one holding now (lifted and put on again since).
   * Sign again over this one.
   */
  "operator_policy_changed",
  /** A passkey assertion names a key id that is no enrolled passkey. */
  "passkey_unknown",
  /** A passkey assertion names a revoked passkey (revoke_operator_passkey): it approves nothing again. */
  "passkey_revoked",
  /** clientDataJSON does not parse, or its `type` is not exactly `webauthn.get`. */
  "passkey_client_data",
  /** The assertion's challenge is not the one of this very change (moved to another action). */
  "passkey_challenge",
  /** clientDataJSON's `origin` is not the enrolled origin. */
  "passkey_origin",
  /** The authenticator data's rpIdHash is not SHA-256 of the enrolled rpId. */
  "passkey_rp",
  /** The authenticator did not verify the user (flags UP and UV not both set). */
  "passkey_user_verification",
  /** The signature's S is above n/2: only the low-S form of a signature is accepted. */
  "passkey_signature_high_s",
  /** The signature does not verify with the enrolled public key. */
  "passkey_signature",
  /** The authenticator's signCount did not grow (a cloned authenticator). */
  "passkey_sign_count",
] as const;
export type OperatorRefusalDetail = (typeof OPERATOR_REFUSAL_DETAILS)[number];

/** The key itself, whatever the op that signs with it. */
export const KEY_REFUSAL_DETAILS = [
  /** The key's address is not the `from` the caller named (the identity's wallet, the treasury). */
  "key_binding",
] as const;
export type KeyRefusalDetail = (typeof KEY_REFUSAL_DETAILS)[number];

/** Every detail, as the wire carries it: the groups above, each once. */
export const REFUSAL_DETAILS = [
  ...TRANSFER_REFUSAL_DETAILS,
  ...TRANSACTION_REFUSAL_DETAILS,
  ...FAUCET_REFUSAL_DETAILS,
  ...X402_AUTHORIZATION_REFUSAL_DETAILS,
  ...SETTLEMENT_REFUSAL_DETAILS,
  ...FILLER_REFUSAL_DETAILS,
  ...OFFER_RECEIPT_REFUSAL_DETAILS,
  ...KEY_REFUSAL_DETAILS,
  ...AGENT_POLICY_REFUSAL_DETAILS,
  ...OPERATOR_REFUSAL_DETAILS,
] as const;
export type RefusalDetail =
  | TransferRefusalDetail
  | TransactionRefusalDetail
  | FaucetRefusalDetail
  | X402AuthorizationRefusalDetail
  | SettlementRefusalDetail
  | FillerRefusalDetail
  | OfferReceiptRefusalDetail
  | KeyRefusalDetail
  | AgentPolicyRefusalDetail
  | OperatorRefusalDetail;

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
  configure_payee: "policy",
  enroll_operator_key: "policy",
  enroll_operator_passkey: "policy",
  // Admin tier: the origin may tighten alone; what loosens also needs an operator's approval,
  // which the op carries and the enclave verifies (shared/operator-approval.ts).
  set_agent_policy: "admin",
  set_node_frozen: "admin",
  approve_held: "admin",
  // Admin tier too: revoking only tightens, as freezing does, so a lost device is revoked at once,
  // without the policy key kept offline (docs/enclave.md#passkeys).
  revoke_operator_passkey: "admin",
  revoke_operator_key: "admin",
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
  "sign_x402_offer",
  "sign_x402_receipt",
  "capability_counter",
  "get_policy",
  "get_agent_policy",
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
  /**
   * The rule that decided: an agent policy's (with policy_denied, policy_held, operator_required),
   * or the node ceiling's bound (with x402_ceiling: x402_max_per_payment_units or x402_payees).
   */
  rule: z.string().max(200).optional().catch(undefined),
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

export type EnclaveFailure = {
  code: EnclaveErrorCode;
  reason: string;
  detail?: RefusalDetail;
  /** The agent policy's rule behind a policy or operator refusal, as shared/agent-policy.ts names it. */
  rule?: string;
};
