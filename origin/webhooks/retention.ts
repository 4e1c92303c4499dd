/**
 * The deliveries log keeps what the event log keeps, AGENT_EVENTS_RETENTION_DAYS days
 * (docs/operations.md#webhooks): a delivery nothing has touched for that long is deleted, in
 * batches like the event log's sweep (events/retention.ts), so one run never holds a long lock. A
 * pending delivery is touched at each claim, so only one whose event has left the log with it,
 * or one no origin could send (none holds a signing key), is old enough to go.
 */
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../db/client.ts";

const SWEEP_BATCH = 5_000;

/** Deletes every delivery untouched for `days` days; returns how many. */
export async function sweepExpiredDeliveries(db: Db, days: number): Promise<number> {
  let total = 0;
  for (;;) {
    const rows = await queryRows<{ id: string }>(
      db,
      sql`delete from webhook_deliveries where id in (
            select id from webhook_deliveries
            where updated_at < now() - make_interval(days => ${days}::int)
            order by id limit ${SWEEP_BATCH})
          returning id`,
    );
    total += rows.length;
    if (rows.length < SWEEP_BATCH) return total;
  }
}
