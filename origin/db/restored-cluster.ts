/**
 * What a database restored from a backup must not hand out again, and what a logical copy brings
 * from another cluster. The migration step every start runs does both (migrate.ts).
 *
 * A restore brings back the sequences as they were at the backup, so every event id and webhook
 * delivery handed out since would be handed out again, to other events: an agent's stream resumed
 * after such an id would start at the wrong event, and a receiver that keeps the `webhook-id`s it
 * has seen (Standard Webhooks' idempotency key, `msg_<delivery id>`) would drop the new ones as
 * repeats. So each start moves both sequences to at least the time in microseconds: an id handed
 * out before was at most the time it was handed out, unless more than a million a second were.
 *
 * A database restored from a logical dump into another cluster (pg_dump and pg_restore, a move to
 * another server the same way) keeps its rows but not its cluster's transaction counter, which
 * starts again near zero. The event log orders by transaction id (docs/events.md#order), and the
 * webhook endpoints keep places and snapshots in the same ids: every event written after such a
 * restore would sort before them, and no stream or endpoint would get one until the new cluster
 * had run as many transactions as the old. An id the cluster has not handed out yet cannot be in
 * a row it wrote itself, so such ids are the mark of a logical restore, and the step moves them
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
    // A snapshot's xmax is one past the newest transaction that has ended: every other
    // transaction's event this cluster wrote and this one sees is below it, though this one's own
    // are not. A place or a snapshot in the log is at most such an xmax, taken earlier.
    sql`with next as (select pg_snapshot_xmax(pg_current_snapshot()) as xid)
        select exists (select 1 from events, next where events.xid >= next.xid
                         and events.xid is distinct from pg_current_xact_id_if_assigned())
            or exists (select 1 from webhook_endpoints w, next
                       where w.fan_out_xid > next.xid or pg_snapshot_xmax(w.created_snapshot) > next.xid) as restored`,
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

/**
 * Moves the event and webhook delivery ids on to at least the database's time in microseconds
 * (a sequence already past it stays where it is), so that no restore hands one out again.
 */
export async function keepIdsAheadOfRestores(tx: Db): Promise<void> {
  await tx.execute(sql`
    select setval(format('%I.%I', s.schemaname, s.sequencename), f.micros)
    from pg_sequences s, (select (extract(epoch from clock_timestamp()) * 1000000)::bigint as micros) f
    where s.schemaname = current_schema()
      and s.sequencename in ('events_id_seq', 'webhook_deliveries_id_seq')
      and coalesce(s.last_value, 0) < f.micros`);
}
