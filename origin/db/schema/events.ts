import { sql } from "drizzle-orm";
import { bigserial, customType, index, jsonb, pgTable, text, timestamp, uuid } from "drizzle-orm/pg-core";

/** Postgres's 64-bit transaction id (xid8), read and written as its decimal text. */
/** A transaction id (`xid8`), as text: the event log's order (docs/events.md#order). */
export const xid8 = customType<{ data: string; driverData: string }>({ dataType: () => "xid8" });

/**
 * The event log (docs/events.md): one row per state change an agent or operator may follow, written
 * by triggers in the transaction of the change itself (migrations 0016, 0019, 0020, 0036), so no
 * writer can forget one and none is written for a change that rolled back. No foreign key to
 * agent_identities: the trigger's insert is on the money path, and a key check per row would cost it
 * a probe per action.
 */
export const events = pgTable(
  "events",
  {
    id: bigserial("id", { mode: "bigint" }).primaryKey(),
    /** Null for a node's own events (`registration.*`), which no agent's stream serves. */
    agentId: uuid("agent_id"),
    type: text("type").notNull(),
    occurredAt: timestamp("occurred_at", { withTimezone: true }).notNull().defaultNow(),
    data: jsonb("data").notNull(),
    /**
     * The writing transaction: readers serve an event only once every transaction below the oldest
     * still running has ended, in (xid, id) order, so one that commits after a higher id is never
     * skipped (docs/events.md#order).
     */
    xid: xid8("xid").notNull().default(sql`pg_current_xact_id()`),
  },
  (t) => [
    index("events_agent_order_idx").on(t.agentId, t.xid, t.id),
    // The webhooks' fan-out reads every agent's events after its place in this order: without it,
    // each run read the whole log and sorted it (a month of retention, every 100 ms).
    index("events_order_idx").on(t.xid, t.id),
    // The retention sweep's range: rows are appended in time order, so a block range index is
    // enough and costs the insert almost nothing.
    index("events_occurred_brin").using("brin", t.occurredAt),
  ],
);
