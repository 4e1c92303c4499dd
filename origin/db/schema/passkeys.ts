import { sql } from "drizzle-orm";
import { bigint, bigserial, check, index, jsonb, pgTable, text, timestamp } from "drizzle-orm/pg-core";
import { LOWER_HEX_64, textFormat } from "./text-format.ts";

/**
 * Operators' passkeys as the console registered them (docs/operations.md#passkeys): pending until
 * the policy authority's holder enrolls one in the enclave (`npm run enclave-policy -- enroll-passkey`),
 * which alone makes it able to approve. The origin keeps only public parts.
 */
export const operatorPasskeys = pgTable(
  "operator_passkeys",
  {
    /** The WebAuthn credential id, unpadded base64url. */
    credentialId: text("credential_id").primaryKey(),
    /** The id the enclave will know it by (enroll_operator_passkey's key_id). */
    keyId: text("key_id").notNull().unique("operator_passkeys_key_id_unique"),
    /** The operator's name, as the audit shows who approved. */
    operator: text("operator").notNull(),
    /** 0x04 ‖ X ‖ Y, P-256 (from the credential's COSE key). */
    publicKey: text("public_key").notNull(),
    rpId: text("rp_id").notNull(),
    origin: text("origin").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    /** When the enclave sealed it; null while pending. */
    enrolledAt: timestamp("enrolled_at", { withTimezone: true }),
    /**
     * The authenticator's signature counter at its last console sign-in: a sign-in whose counter
     * does not exceed it (when either is non-zero) is refused as a possible clone.
     */
    signCount: bigint("sign_count", { mode: "number" }).notNull().default(0),
    /**
     * When it was revoked (docs/operations.md#revoking-a-passkey), set once the enclave revoked it
     * (or at once for a pending one): a failed revoke leaves it null and is simply run again. A
     * revoked passkey signs no one in, its sessions end, and it is never enrolled again.
     */
    revokedAt: timestamp("revoked_at", { withTimezone: true }),
    /** Why, as the revoking operator gave it (the audit shows it). */
    revokedReason: text("revoked_reason"),
    /** The channel: console or cli. */
    revokedSource: text("revoked_source"),
    /** The operator signed in with a passkey who revoked it; null under the shared tokens or the CLI. */
    revokedBy: text("revoked_by"),
    /** That operator's passkey (its key id); null with revoked_by. */
    revokedByKeyId: text("revoked_by_key_id"),
  },
  (t) => [
    // A revocation is recorded whole: when, why and through what, or not at all.
    check(
      "operator_passkeys_revoked_whole",
      sql`(${t.revokedAt} is null) = (${t.revokedReason} is null) and (${t.revokedAt} is null) = (${t.revokedSource} is null)`,
    ),
    check("operator_passkeys_revoked_source_enum", sql`${t.revokedSource} IN ('console','cli')`),
    check(
      "operator_passkeys_public_key_format",
      textFormat(t.publicKey, { prefix: "0x04", chars: "[0-9a-f]", count: 128 }),
    ),
    // Postgres bounds a regex repetition at 255: the length is checked on its own.
    check(
      "operator_passkeys_credential_id_format",
      sql`${t.credentialId} ~ '^[A-Za-z0-9_-]+$' and char_length(${t.credentialId}) between 16 and 1364`,
    ),
  ],
);

/**
 * Every change a passkey approved through the console (the audit): which operator, which passkey,
 * the op and what it showed them, exactly as the enclave checked it.
 */
export const passkeyApprovals = pgTable(
  "passkey_approvals",
  {
    approvalId: bigserial("approval_id", { mode: "bigint" }).primaryKey(),
    keyId: text("key_id").notNull(),
    operator: text("operator").notNull(),
    op: text("op").notNull(),
    /** The agent id, the action id, or `node` for the node's freeze. */
    subject: text("subject").notNull(),
    /** The shown document the challenge covered (shared/passkey-approval.ts). */
    shown: jsonb("shown").notNull(),
    approvedAt: timestamp("approved_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check("passkey_approvals_op_enum", sql`${t.op} IN ('approve_held','set_agent_policy','set_node_frozen')`),
    index("passkey_approvals_at_idx").on(t.approvedAt),
  ],
);

/**
 * Console sessions (docs/operations.md#signing-in-with-a-passkey): an operator signed in with an
 * enrolled passkey. Only the SHA-256 of the session token is kept; the token itself is answered
 * once. A session is good until it expires or is ended (signed out), checked at every request.
 */
export const operatorSessions = pgTable(
  "operator_sessions",
  {
    /** SHA-256 of the token, hex. */
    tokenHash: text("token_hash").primaryKey(),
    operator: text("operator").notNull(),
    /** The enrolled passkey that signed in (operator_passkeys.key_id). */
    keyId: text("key_id").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp("expires_at", { withTimezone: true }).notNull(),
    endedAt: timestamp("ended_at", { withTimezone: true }),
  },
  (t) => [
    check("operator_sessions_token_hash_format", textFormat(t.tokenHash, LOWER_HEX_64)),
    index("operator_sessions_expires_idx").on(t.expiresAt),
  ],
);
