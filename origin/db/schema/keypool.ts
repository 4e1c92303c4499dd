import { sql } from "drizzle-orm";
import { check, index, integer, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";
import { agentIdentities } from "./identities.ts";
import { LOWER_ADDRESS, LOWER_HEX_64, textFormat } from "./text-format.ts";

/** A key batch: requested → generated → backup_written → backup_verified → available, or failed. */
export const keyBatches = pgTable(
  "key_batches",
  {
    batchId: uuid("batch_id").primaryKey().defaultRandom(),
    namespace: text("namespace").notNull().default("agent-transfer"),
    size: integer("size").notNull(),
    status: text("status").notNull().default("requested"),
    backupPath: text("backup_path"),
    backupSha256: text("backup_sha256"),
    failureReason: text("failure_reason"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    statusChangedAt: timestamp("status_changed_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check(
      "key_batches_status_enum",
      sql`${t.status} IN ('requested','generated','backup_written','backup_verified','available','failed')`,
    ),
    check("key_batches_size_positive", sql`${t.size} > 0`),
    index("key_batches_status_idx").on(t.status, t.statusChangedAt),
  ],
);

/** A key: pending → free → assigned, or quarantined. A key never returns to free. */
export const keyPool = pgTable(
  "key_pool",
  {
    keyRef: text("key_ref").primaryKey(),
    batchId: uuid("batch_id")
      .notNull()
      .references(() => keyBatches.batchId),
    address: text("address").notNull().unique(),
    publicKey: text("public_key").notNull(),
    status: text("status").notNull().default("pending"),
    assignedAgentId: uuid("assigned_agent_id").references(() => agentIdentities.agentId),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    assignedAt: timestamp("assigned_at", { withTimezone: true }),
  },
  (t) => [
    check("key_pool_status_enum", sql`${t.status} IN ('pending','free','assigned','quarantined')`),
    check("key_pool_key_ref_format", textFormat(t.keyRef, LOWER_HEX_64)),
    check("key_pool_address_format", textFormat(t.address, LOWER_ADDRESS)),
    check("key_pool_assignment", sql`(${t.status} = 'assigned') = (${t.assignedAgentId} IS NOT NULL)`),
    // The free keys in the claim's exact order (oldest first, then key_ref): keys of one batch share
    // created_at, so without key_ref in the index every claim sorted the whole batch. The free
    // stock's count reads it too: one index of the free keys, not two (migration 0034).
    index("key_pool_free_order_idx").on(t.createdAt, t.keyRef).where(sql`${t.status} = 'free'`),
    index("key_pool_batch_idx").on(t.batchId),
  ],
);

/** The restore method whose evidence opens the funding gate (docs/api.md, "The funding gate"). */
export const RESTORE_METHOD_NEW_ENCLAVE = "recovery_key_new_enclave";

/**
 * A restore drill reproduced the batch's public keys. `method` says how: only
 * `recovery_key_new_enclave` (the recovery key's copy, restored into a throwaway enclave with no
 * copy of the live one's data folder) opens the funding gate; `scratch_namespace` rows
 * are the earlier drills into the live enclave itself, kept as history.
 */
export const restoreEvidence = pgTable(
  "restore_evidence",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    batchId: uuid("batch_id")
      .notNull()
      .references(() => keyBatches.batchId),
    method: text("method").notNull(),
    /** Only for `scratch_namespace` evidence. */
    scratchNamespace: text("scratch_namespace"),
    keyCount: integer("key_count").notNull(),
    publicKeysSha256: text("public_keys_sha256").notNull(),
    /** Fingerprint (SHA-256) of the recovery encryption key whose copy was restored. */
    recoveryKeySha256: text("recovery_key_sha256"),
    /** The restored key that signed the drill's test message (an identity proof). */
    provenKeyRef: text("proven_key_ref"),
    restoredAt: timestamp("restored_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check(
      "restore_evidence_method_enum",
      sql`${t.method} IN ('scratch_namespace','recovery_key_new_enclave')`,
    ),
  ],
);
