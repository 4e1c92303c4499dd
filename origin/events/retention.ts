/**
 * The event log keeps AGENT_EVENTS_RETENTION_DAYS days (docs/events.md#retention): a sweep deletes
 * older events in batches, so one run never holds a long lock or a long transaction (a long
 * transaction would hold every stream's horizon back).
 */
import type { Db } from "../db/client.ts";
import { sweepOldEvents } from "./store.ts";

const SWEEP_BATCH = 5_000;

/** Deletes every event older than `days` days; returns how many. */
export async function sweepExpiredEvents(db: Db, days: number): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await sweepOldEvents(db, { days, limit: SWEEP_BATCH });
    total += deleted;
    if (deleted < SWEEP_BATCH) return total;
  }
}
