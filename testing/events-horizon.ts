/**
 * The suite's databases share one Postgres cluster, and the event log's horizon (the oldest
 * transaction still running, docs/events.md#order) is the cluster's: another file's open
 * transaction holds every database's horizon back. A test that reads the log right after writing
 * waits for this first, so it asserts what it names and not another file's timing.
 */
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../origin/db/client.ts";
import { until } from "./webhook-fixture.ts";

/** Whether every event written so far is below the horizon now. */
async function eventsServable(db: Db): Promise<boolean> {
  const [row] = await queryRows<{ servable: boolean }>(
    db,
    sql`select not exists (select 1 from events where xid >= pg_snapshot_xmin(pg_current_snapshot())) as servable`,
  );
  return row!.servable;
}

/** Waits until every event written so far is below the horizon (30 s at most). */
export async function untilEventsServable(db: Db): Promise<void> {
  await until("the events to be below the horizon", () => eventsServable(db), 30_000);
}
