/**
 * The webhooks' fan-out (docs/operations.md#webhooks): turns the event log, in its serving order
 * (docs/events.md#order), into one delivery row per event and subscribed endpoint. One origin at a
 * time runs it (a transaction-scoped advisory lock: the others skip their turn), and the unique
 * (endpoint, event) makes a repeat harmless, so origins sharing a database queue each delivery once.
 */
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../db/client.ts";
import { type Cursor, compareCursors, horizonCursor } from "../events/cursor.ts";
import { readServable } from "../events/store.ts";

/** The advisory lock key of the fan-out ("webh" in ASCII), one per database. */
const FAN_OUT_LOCK = 0x77656268;
const READ_BATCH = 500;

export type FanOutResult = { ran: false } | { ran: true; events: number; deliveries: number };

/**
 * Reads the servable events after the stored cursor, queues their deliveries and moves the cursor,
 * in one transaction. A first run starts at the log's current horizon: an endpoint gets the events
 * written after it was added, and `replay` reaches older ones.
 */
export async function fanOutOnce(db: Db): Promise<FanOutResult> {
  return db.transaction(async (tx) => {
    const [lock] = await queryRows<{ locked: boolean }>(
      tx as unknown as Db,
      sql`select pg_try_advisory_xact_lock(${FAN_OUT_LOCK}) as locked`,
    );
    if (!lock?.locked) return { ran: false };
    const t = tx as unknown as Db;
    // The reads come before this transaction writes anything, so it has no xid of its own yet and
    // does not hold its own horizon back.
    const [stored] = await queryRows<{ xid: string; event_id: string }>(
      t,
      sql`select xid::text as xid, event_id::text as event_id from webhook_fan_out_cursor`,
    );
    let after: Cursor;
    let fresh = false;
    if (stored) after = { xid: BigInt(stored.xid), id: BigInt(stored.event_id) };
    else {
      const [row] = await queryRows<{ horizon: string }>(
        t,
        sql`select pg_snapshot_xmin(pg_current_snapshot())::text as horizon`,
      );
      after = horizonCursor(BigInt(row!.horizon));
      fresh = true;
    }
    // With no endpoint enabled there is nothing to queue: the cursor moves to the horizon of the
    // snapshot that saw none (an endpoint added later gets the events written after it, as ever).
    // The log's rows are read only for endpoints, and without their data, which a delivery reads.
    const [idle] = await queryRows<{ any: boolean; horizon: string }>(
      t,
      sql`select exists(select 1 from webhook_endpoints where enabled) as any,
                 pg_snapshot_xmin(pg_current_snapshot())::text as horizon`,
    );
    const { events, horizon } = idle!.any
      ? await readServable(t, { agentIds: undefined, after, limit: READ_BATCH, withData: false })
      : { events: [], horizon: BigInt(idle!.horizon) };
    let deliveries = 0;
    if (events.length > 0) {
      const ids = events.map((event) => event.id.toString());
      const rows = await queryRows<{ id: string }>(
        t,
        sql`insert into webhook_deliveries (endpoint_id, event_id)
            select w.id, e.id from events e
            join webhook_endpoints w on w.enabled and e.type = any(w.event_types)
              and e.occurred_at >= w.created_at
            where e.id = any(${`{${ids.join(",")}}`}::bigint[])
            on conflict (endpoint_id, event_id) do nothing
            returning id`,
      );
      deliveries = rows.length;
    }
    // Past the last event read, or up to the horizon when the read found everything below it.
    const last = events.at(-1);
    let next: Cursor = last ? { xid: last.xid, id: last.id } : after;
    if (events.length < READ_BATCH) {
      const atHorizon = horizonCursor(horizon);
      if (compareCursors(atHorizon, next) > 0) next = atHorizon;
    }
    if (fresh || compareCursors(next, after) !== 0) {
      await t.execute(
        sql`insert into webhook_fan_out_cursor (singleton, xid, event_id)
            values (1, ${next.xid.toString()}::xid8, ${next.id.toString()}::bigint)
            on conflict (singleton) do update set xid = excluded.xid, event_id = excluded.event_id`,
      );
    }
    return { ran: true, events: events.length, deliveries };
  });
}
