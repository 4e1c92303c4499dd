import { sql } from "drizzle-orm";
import { boolean, check, customType, index, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { LOWER_ADDRESS, LOWER_HEX_64, textFormat } from "./text-format.ts";

const bytea = customType<{ data: Buffer; driverData: Buffer }>({ dataType: () => "bytea" });

/** An agent's identity: its wallet and key reference, its capabilities (docs/architecture.md#state). */
export const agentIdentities = pgTable(
  "agent_identities",
  {
    agentId: uuid("agent_id").primaryKey().defaultRandom(),
    assignedWallet: text("assigned_wallet").notNull().unique(),
    agentTransferKeyRef: text("agent_transfer_key_ref").notNull().unique(),
    capabilities: text("capabilities").array().notNull(),
    enabled: boolean("enabled").notNull().default(true),
    revoked: boolean("revoked").notNull().default(false),
    origin: text("origin").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    lastVerifiedAt: timestamp("last_verified_at", { withTimezone: true }),
    disabledReason: text("disabled_reason"),
    disabledAt: timestamp("disabled_at", { withTimezone: true }),
    revokedAt: timestamp("revoked_at", { withTimezone: true }),
  },
  (t) => [
    // Capabilities are a closed enum of exactly read, faucet, transfer (docs/api.md#conventions).
    check(
      "agent_identities_capabilities_enum",
      sql`${t.capabilities} <@ ARRAY['read','faucet','transfer']::text[] AND cardinality(${t.capabilities}) > 0`,
    ),
    check("agent_identities_origin_enum", sql`${t.origin} IN ('operator','public')`),
    check("agent_identities_wallet_format", textFormat(t.assignedWallet, LOWER_ADDRESS)),
    check("agent_identities_key_ref_format", textFormat(t.agentTransferKeyRef, LOWER_HEX_64)),
    index("agent_identities_sweep_idx").on(t.lastVerifiedAt).where(sql`${t.enabled}`),
    // The console's list of identities, newest first (console/browse-queries.ts readIdentityPage).
    // On created_at alone, as agent_actions_created_idx and for the same reason.
    index("agent_identities_created_idx").on(t.createdAt),
  ],
);

/** A token is `agt_<token_id>_<secret>`; only SHA-256(secret) is stored. */
export const agentTokens = pgTable(
  "agent_tokens",
  {
    tokenId: text("token_id").primaryKey(),
    agentId: uuid("agent_id")
      .notNull()
      .references(() => agentIdentities.agentId),
    secretHash: bytea("secret_hash").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check("agent_tokens_token_id_format", textFormat(t.tokenId, { chars: "[0-9a-f]", count: 32 })),
    check("agent_tokens_secret_hash_length", sql`octet_length(${t.secretHash}) = 32`),
    index("agent_tokens_agent_idx").on(t.agentId),
  ],
);

/** Outcomes of the scheduled identity proof (docs/operations.md#what-a-finding-means). */
export const identityFindings = pgTable(
  "identity_findings",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    agentId: uuid("agent_id")
      .notNull()
      .references(() => agentIdentities.agentId),
    class: text("class").notNull(),
    code: text("code").notNull(),
    detail: text("detail"),
    at: timestamp("at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check(
      "identity_findings_class_enum",
      sql`${t.class} IN ('destructive','retryable','terminal_config','terminal_wire','terminal_agent','terminal_malformed','terminal_unknown')`,
    ),
    index("identity_findings_agent_idx").on(t.agentId, t.at),
    // The console's latest findings and findings of the last day by class (console/charts-queries.ts).
    index("identity_findings_at_idx").on(t.at),
  ],
);

/**
 * Every operator disable, enable or revocation of an identity (docs/api.md#the-operator-console),
 * with the reason, written in the transaction that makes the change. The source is the channel
 * (console or CLI); `operator` and `passkey_key_id` name who, for a change made signed in with a
 * passkey (null under the shared tokens and the CLI). `change` names what the operator
 * did, as the other change tables do; `before_enabled`/`after_enabled` are the enabled flag around
 * it, which a revocation leaves as it was (it is final whatever the flag says).
 */
export const identityChanges = pgTable(
  "identity_changes",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    agentId: uuid("agent_id")
      .notNull()
      .references(() => agentIdentities.agentId),
    change: text("change").notNull(),
    beforeEnabled: boolean("before_enabled").notNull(),
    afterEnabled: boolean("after_enabled").notNull(),
    reason: text("reason").notNull(),
    source: text("source").notNull(),
    /**
     * The operator signed in with a passkey who made the change, and that passkey's key id
     * (docs/operations.md#signing-in-with-a-passkey); both null for the shared admin tokens and the CLI.
     */
    operator: text("operator"),
    passkeyKeyId: text("passkey_key_id"),
    changedAt: timestamp("changed_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check("identity_changes_reason_nonempty", sql`length(trim(${t.reason})) > 0`),
    check("identity_changes_operator_whole", sql`(${t.operator} IS NULL) = (${t.passkeyKeyId} IS NULL)`),
    check("identity_changes_source_enum", sql`${t.source} IN ('console','cli')`),
    // A disable or enable moves the flag its way; a revocation leaves it alone.
    check(
      "identity_changes_change_matches",
      sql`(${t.change} = 'disable' AND ${t.beforeEnabled} AND NOT ${t.afterEnabled})
        OR (${t.change} = 'enable' AND NOT ${t.beforeEnabled} AND ${t.afterEnabled})
        OR (${t.change} = 'revoke' AND ${t.beforeEnabled} = ${t.afterEnabled})`,
    ),
    index("identity_changes_changed_idx").on(t.changedAt),
  ],
);
