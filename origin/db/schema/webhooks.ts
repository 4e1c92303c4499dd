import { sql } from "drizzle-orm";
import {
  bigint,
  bigserial,
  boolean,
  check,
  customType,
  index,
  integer,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import { xid8 } from "./events.ts";

/** A Postgres snapshot (`pg_snapshot`), as text: which transactions had committed when it was taken. */
const pgSnapshot = customType<{ data: string; driverData: string }>({ dataType: () => "pg_snapshot" });

/**
 * An operator's webhook endpoint (docs/operations.md#webhooks). The HMAC secret is stored as is:
 * every delivery is signed with it, so the origin must read it (docs/security.md#webhooks).
 */
export const webhookEndpoints = pgTable(
  "webhook_endpoints",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    url: text("url").notNull(),
    /** Dotted event types of the event log, an explicit list (no wildcard). */
    eventTypes: text("event_types").array().notNull(),
    /** `whsec_` and the base64 of 32 random bytes. */
    secret: text("secret").notNull(),
    /**
     * The secret a rotation replaced, still signing beside the new one until `previous_secret_until`
     * so receivers can switch over (docs/operations.md#webhooks); both null when none is rotating.
     */
    previousSecret: text("previous_secret"),
    previousSecretUntil: timestamp("previous_secret_until", { withTimezone: true }),
    enabled: boolean("enabled").notNull().default(true),
    disabledReason: text("disabled_reason"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    /**
     * The transactions committed when the endpoint was added: it gets the events of every other
     * one, whenever it began (origin/webhooks/endpoints.ts writtenSinceAdded). Null for an endpoint
     * added before migration 0040, which goes by `created_at` as it did.
     */
    createdSnapshot: pgSnapshot("created_snapshot").default(sql`pg_current_snapshot()`),
    /**
     * The endpoint's place in the event log, the cursor shape of the streams (origin/events/cursor.ts):
     * every event at or before it has its delivery queued. It starts at the log's horizon when the
     * endpoint is added, so the endpoint gets what is written after; each endpoint keeps its own, so
     * one that is at its bound of pending deliveries waits there without holding the others back
     * (docs/operations.md#webhooks).
     */
    fanOutXid: xid8("fan_out_xid").notNull().default(sql`pg_snapshot_xmin(pg_current_snapshot())`),
    fanOutEventId: bigint("fan_out_event_id", { mode: "bigint" }).notNull().default(sql`0`),
  },
  (t) => [
    check(
      "webhook_endpoints_previous_secret_whole",
      sql`(${t.previousSecret} IS NULL) = (${t.previousSecretUntil} IS NULL)`,
    ),
  ],
);

/** One event to one endpoint: retried on the schedule until delivered, failed or disabled. */
export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    id: bigserial("id", { mode: "bigint" }).primaryKey(),
    endpointId: uuid("endpoint_id")
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: "cascade" }),
    eventId: bigint("event_id", { mode: "bigint" }).notNull(),
    attempts: integer("attempts").notNull().default(0),
    /**
     * Times an operator queued it again (replay). An attempt records its outcome only while this
     * is what it was claimed with: one in flight when the replay came must not end the replay.
     */
    replays: integer("replays").notNull().default(0),
    nextAttemptAt: timestamp("next_attempt_at", { withTimezone: true }).notNull().defaultNow(),
    status: text("status").notNull().default("pending"),
    lastHttpStatus: integer("last_http_status"),
    lastError: text("last_error"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("webhook_deliveries_endpoint_event_uq").on(t.endpointId, t.eventId),
    // The claim reads only what is still to send.
    index("webhook_deliveries_due_idx").on(t.nextAttemptAt).where(sql`status = 'pending'`),
    // An endpoint's pending deliveries: the fan-out counts them against the bound (an index-only
    // count, capped at the bound), and a success makes those waiting on a later retry due now (a
    // range of next_attempt_at, past the fresh ones that are due already).
    index("webhook_deliveries_pending_endpoint_idx")
      .on(t.endpointId, t.nextAttemptAt)
      .where(sql`status = 'pending'`),
    check(
      "webhook_deliveries_status_check",
      sql`${t.status} in ('pending', 'delivered', 'failed', 'disabled')`,
    ),
  ],
);

/**
 * Every operator change of the webhook endpoints (docs/operations.md#webhooks): added, removed,
 * replayed, from the console or `npm run webhooks`, with before, after and reason, like the other
 * console changes. No foreign key: the record outlives a removed endpoint.
 */
export const webhookEndpointChanges = pgTable(
  "webhook_endpoint_changes",
  {
    id: bigserial("id", { mode: "bigint" }).primaryKey(),
    endpointId: uuid("endpoint_id").notNull(),
    change: text("change").notNull(),
    before: text("before"),
    after: text("after").notNull(),
    /** Required from the console; `npm run webhooks` may leave it out. */
    reason: text("reason"),
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
    check(
      "webhook_endpoint_changes_change_enum",
      sql`${t.change} IN ('add','remove','replay','rotate_secret')`,
    ),
    check(
      "webhook_endpoint_changes_operator_whole",
      sql`(${t.operator} IS NULL) = (${t.passkeyKeyId} IS NULL)`,
    ),
    check("webhook_endpoint_changes_source_enum", sql`${t.source} IN ('console','cli')`),
    check(
      "webhook_endpoint_changes_reason_nonempty",
      sql`${t.reason} IS NULL OR length(trim(${t.reason})) > 0`,
    ),
    index("webhook_endpoint_changes_changed_idx").on(t.changedAt),
  ],
);
