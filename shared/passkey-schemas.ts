/**
 * Wire schemas of the console's passkey routes (docs/operations.md#passkeys): the registration
 * ceremony (options, then the authenticator's response, kept as a pending credential) and the
 * approval relay (the shown document and challenge of a change, then the assertion, relayed to the
 * enclave). The WebAuthn option and response objects are @simplewebauthn's JSON shapes, passed
 * through as they are. Runtime-neutral.
 */
import * as z from "zod";
import { reasonSchema } from "./console-schemas.ts";
import { OPERATOR_KEY_ID_PATTERN, operatorNameSchema } from "./enclave-ops.ts";

const operatorName = operatorNameSchema;
const webauthnJson = z.record(z.string(), z.unknown());

export const passkeyRegistrationOptionsRequestSchema = z.strictObject({ operator: operatorName });
export const passkeyRegistrationOptionsSchema = z.object({
  /** PublicKeyCredentialCreationOptionsJSON, for navigator.credentials.create (startRegistration). */
  options: webauthnJson,
});

export const passkeyRegistrationRequestSchema = z.strictObject({
  operator: operatorName,
  /** RegistrationResponseJSON, as startRegistration returns it. */
  response: webauthnJson,
});
export const passkeySchema = z.object({
  key_id: z.string(),
  operator: z.string(),
  credential_id: z.string(),
  public_key: z.string(),
  rp_id: z.string(),
  origin: z.string(),
  /** SHA-256 of the public key, the first 16 hex digits: what the enrolling holder compares. */
  fingerprint: z.string(),
  /** Pending until the policy authority's holder enrolls it (`npm run enclave-policy -- enroll-passkey`). */
  enrolled: z.boolean(),
  /**
   * When it was revoked (ISO 8601), or null: a revoked passkey approves nothing, signs no one in,
   * and is never enrolled again (docs/operations.md#revoking-a-passkey).
   */
  revoked_at: z.string().nullable(),
  /** Why it was revoked, as the revoking operator said; null while it is not. */
  revoked_reason: z.string().nullable(),
});
export type PasskeyView = z.infer<typeof passkeySchema>;
/** POST {base}/admin/agents/passkeys/{key_id}/revoke: why (the audit shows it). */
export const passkeyRevokeRequestSchema = z.strictObject({ reason: reasonSchema });

export const passkeysSchema = z.object({ passkeys: z.array(passkeySchema) });

/** What is to be approved: a held action, an agent's policy loosened, or the node unfrozen. */
const approvalTarget = z.discriminatedUnion("change", [
  z.strictObject({ change: z.literal("approve_held"), action_id: z.uuid() }),
  z.strictObject({
    change: z.literal("set_agent_policy"),
    agent_id: z.uuid(),
    /** The whole policy after the change (shared/agent-policy.ts), or null for none. */
    policy: z.record(z.string(), z.unknown()).nullable(),
  }),
  z.strictObject({ change: z.literal("unfreeze") }),
]);
export type ApprovalTarget = z.infer<typeof approvalTarget>;

export const approvalOptionsRequestSchema = z.strictObject({
  target: approvalTarget,
  key_id: z.string().regex(OPERATOR_KEY_ID_PATTERN),
});
export const approvalOptionsSchema = z.object({
  key_id: z.string(),
  operator: z.string(),
  counter: z.number().int().positive(),
  /** Unix seconds: the approval is void after. */
  expires_at: z.number().int(),
  /** Exactly what the passkey signs over (shared/passkey-approval.ts), for the page to show. */
  shown: z.record(z.string(), z.unknown()),
  /** base64url of SHA-256 of the canonical bytes; the assertion's challenge. */
  challenge: z.string(),
  /** PublicKeyCredentialRequestOptionsJSON, for navigator.credentials.get (startAuthentication). */
  options: webauthnJson,
});
export type ApprovalOptions = z.infer<typeof approvalOptionsSchema>;

export const approvalRequestSchema = z.strictObject({
  target: approvalTarget,
  key_id: z.string().regex(OPERATOR_KEY_ID_PATTERN),
  counter: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
  expires_at: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  /** The held approval's lifetime as `shown` named it (approve_held only). */
  approval_expires_at: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).optional(),
  /** AuthenticationResponseJSON, as startAuthentication returns it. */
  response: webauthnJson,
});
export const approvalResultSchema = z.object({
  change: z.enum(["approve_held", "set_agent_policy", "unfreeze"]),
  operator: z.string(),
  key_id: z.string(),
  /** The action id, the agent id, or `node`. */
  subject: z.string(),
  /** approve_held: `approved`; set_agent_policy: the new version; unfreeze: `unfrozen`. */
  outcome: z.string(),
});
export type ApprovalResult = z.infer<typeof approvalResultSchema>;

/** POST {base}/admin/agents/session/options: the WebAuthn request options of a sign-in. */
export const sessionOptionsSchema = z.object({
  /** PublicKeyCredentialRequestOptionsJSON, for navigator.credentials.get (startAuthentication). */
  options: webauthnJson,
});
/** POST {base}/admin/agents/session: the assertion of an enrolled passkey. */
export const sessionRequestSchema = z.strictObject({
  /** AuthenticationResponseJSON, as startAuthentication returns it. */
  response: webauthnJson,
});
/** The session's token, answered once: the console sends it as `x-console-session`. */
export const sessionStartedSchema = z.object({
  token: z.string(),
  operator: z.string(),
  key_id: z.string(),
  expires_at: z.string(),
});
export type SessionStarted = z.infer<typeof sessionStartedSchema>;
/** GET {base}/admin/agents/session: who is signed in; all null under the shared admin tokens. */
export const sessionViewSchema = z.object({
  operator: z.string().nullable(),
  key_id: z.string().nullable(),
  expires_at: z.string().nullable(),
});
export type SessionView = z.infer<typeof sessionViewSchema>;
/** POST {base}/admin/agents/session/end-all: the signed-in operator's sessions ended, this one too. */
export const sessionsEndedSchema = z.object({
  operator: z.string(),
  ended: z.number().int(),
});
export type SessionsEnded = z.infer<typeof sessionsEndedSchema>;
