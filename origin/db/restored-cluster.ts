/**
 * A database restored from a logical dump into another cluster (pg_dump and pg_restore, a move to
 * another server the same way) keeps its rows but not its cluster's transaction counter, which
 * starts again near zero. The event log orders by transaction id (docs/events.md#order), and the
 * webhook endpoints keep places and snapshots in the same ids: every event written after such a
 * restore would sort before them, and no stream or endpoint would get one until the new cluster
 * had run as many transactions as the old. An id the cluster has not handed out yet cannot be in
 * a row it wrote itself, so such ids are the mark of a restore, and the migration step moves them
 * below the cluster's own (below every transaction the cluster runs from then on).
 */
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "./client.ts";

/**
 * The transaction id every restored event is given: below any id a cluster hands out (its first
 * normal one is 3), so the restored log is served first, in the order of its event ids.
 */
const RESTORED_XID = "1";

/**
 * Moves a restored log's transaction ids below this cluster's, in the migration's transaction
 * (its lock keeps two starting nodes from both doing it). Returns how many events moved: 0 when the
 * log is this cluster's own.
 *
 * Each endpoint's place becomes the one before the first event it had not reached (re-reading an
 * event it had queued queues nothing: one delivery per endpoint and event), and its snapshot is
 * dropped, so it goes by the time it was added, as an endpoint added before migration 0040 does. A
 * stream that resumes after an event then gets the events with higher ids, the restored ones
 * first: one that committed before a lower id's, in the old cluster, is served again.
 */
export async function rebaseRestoredEventLog(tx: Db): Promise<number> {
  const [found] = await queryRows<{ restored: boolean }>(
    tx,
    sql`with next as (select pg_snapshot_xmax(pg_current_snapshot()) as xid)
        select exists (select 1 from events, next where events.xid >= next.xid)
            or exists (select 1 from webhook_endpoints w, next
                       where w.fan_out_xid >= next.xid or pg_snapshot_xmax(w.created_snapshot) > next.xid) as restored`,
  );
  if (!found?.restored) return 0;
  await tx.execute(sql`
    update webhook_endpoints w
    set fan_out_xid = ${RESTORED_XID}::xid8,
        fan_out_event_id = coalesce(
          (select min(e.id) - 1 from events e where (e.xid, e.id) > (w.fan_out_xid, w.fan_out_event_id)),
          (select coalesce(max(e.id), 0) from events e)),
        created_snapshot = null`);
  const moved = await queryRows<{ n: string }>(
    tx,
    sql`with moved as (update events set xid = ${RESTORED_XID}::xid8 where xid <> ${RESTORED_XID}::xid8 returning 1)
        select count(*)::text as n from moved`,
  );
  return Number(moved[0]!.n);
}
