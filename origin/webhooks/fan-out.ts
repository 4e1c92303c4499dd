/**
 * The webhooks' fan-out (docs/operations.md#webhooks): turns the event log, in its serving order
 * (docs/events.md#order), into one delivery row per event and subscribed endpoint. Each endpoint
 * has its own place in the log and queues only while it has fewer than `maxPending` pending
 * deliveries: one whose receiver is down or hangs stops at its bound, keeps its place, and goes on
 * from there once deliveries end, while the others go on without it. One origin at a time runs it
 * (a transaction-scoped advisory lock: the others skip their turn), and the unique (endpoint,
 * event) makes a repeat harmless, so origins sharing a database queue each delivery once.
 */
import { sql } from "drizzle-orm";
import { type Db, pgArrayLiteral, queryRows } from "../db/client.ts";
import { type Cursor, compareCursors, horizonCursor, laterCursor } from "../events/cursor.ts";
import { type LoggedEvent, readServable } from "../events/store.ts";
import { writtenSinceAdded } from "./endpoints.ts";

/** The advisory lock key of the fan-out ("webh" in ASCII), one per database. */
const FAN_OUT_LOCK = 0x77656268;
const READ_BATCH = 500;

export type FanOutParams = {
  /** Pending deliveries an endpoint may have; at that many it is not read for. */
  maxPending: number;
  /**
   * The schedule's first entry (AGENT_WEBHOOKS_RETRY_SECONDS): seconds from queueing to the first
   * attempt; 0, at once, when not given.
   */
  firstAttemptSeconds?: number;
};

export type FanOutResult =
  | { ran: false }
  | {
      ran: true;
      events: number;
      deliveries: number;
      /** Enabled endpoints left at their bound this run. */
      atBound: number;
      /**
       * Endpoints whose place in the log is older than the log itself: the event there was deleted
       * by the retention sweep, so events after it may have been deleted before they were queued.
       */
      behindRetention: string[];
    };

type EndpointRow = {
  id: string;
  xid: string;
  event_id: string;
  pending: number;
  position_gone: boolean;
};

/** An endpoint the fan-out reads for this run: where it is and how many more it may queue. */
type Reader = { id: string; position: Cursor; room: number };

const cursorKey = (cursor: Cursor): string => `${cursor.xid}:${cursor.id}`;

/**
 * One run: each enabled endpoint under its bound gets the events after its place queued, up to
 * its room, and its place moves past what it took. Endpoints at one place share one read of the
 * log's rows, without their data (a delivery reads that).
 */
export async function fanOutOnce(db: Db, params: FanOutParams): Promise<FanOutResult> {
  return db.transaction(async (tx) => {
    const t = tx as unknown as Db;
    const [lock] = await queryRows<{ locked: boolean }>(
      t,
      sql`select pg_try_advisory_xact_lock(${FAN_OUT_LOCK}) as locked`,
    );
    if (!lock?.locked) return { ran: false };
    // The count stops at the bound: an endpoint at it costs `maxPending` entries of the pending
    // index, whatever its queue holds (a replay may queue more), and nothing else.
    const endpoints = await queryRows<EndpointRow>(
      t,
      sql`select w.id, w.fan_out_xid::text as xid, w.fan_out_event_id::text as event_id,
                 (select count(*)::int from (
                    select 1 from webhook_deliveries d
                    where d.endpoint_id = w.id and d.status = 'pending'
                    limit ${params.maxPending}) p) as pending,
                 w.fan_out_event_id > 0
                   and not exists (select 1 from events e where e.id = w.fan_out_event_id) as position_gone
          from webhook_endpoints w
          where w.enabled`,
    );
    const readers: Reader[] = [];
    const behindRetention: string[] = [];
    for (const row of endpoints) {
      if (row.pending >= params.maxPending) continue;
      readers.push({
        id: row.id,
        position: { xid: BigInt(row.xid), id: BigInt(row.event_id) },
        room: params.maxPending - row.pending,
      });
      if (row.position_gone) behindRetention.push(row.id);
    }
    const groups = new Map<string, Reader[]>();
    for (const reader of readers) {
      const key = cursorKey(reader.position);
      groups.set(key, [...(groups.get(key) ?? []), reader]);
    }
    // Every read before the first insert, while this transaction has no xid of its own yet and so
    // does not hold its reads' horizon back. Unlike the streams' feed, it need not wait for the
    // reads' WAL mark to be on disk (events/store.ts untilOnDisk): the positions it moves commit
    // with a flush that takes everything it read with them, and nothing is sent before.
    const reads: Array<{ group: Reader[]; events: LoggedEvent[]; end: Cursor }> = [];
    for (const group of groups.values()) {
      const after = group[0]!.position;
      const read = await readServable(t, { agentIds: undefined, after, limit: READ_BATCH, withData: false });
      // Past the last event read, or up to the horizon when the read found everything below it.
      const last = read.events.at(-1);
      let end: Cursor = last ? { xid: last.xid, id: last.id } : after;
      if (read.events.length < READ_BATCH) end = laterCursor(horizonCursor(read.horizon), end);
      reads.push({ group, events: read.events, end });
    }
    let events = 0;
    let deliveries = 0;
    const moved: Array<{ id: string; position: Cursor }> = [];
    for (const { group, events: read, end } of reads) {
      events += read.length;
      const taken =
        read.length === 0
          ? new Map<string, Taken>()
          : await queueDeliveries(t, {
              readers: group,
              eventIds: read.map((event) => event.id),
              firstAttemptSeconds: params.firstAttemptSeconds ?? 0,
            });
      for (const reader of group) {
        const took = taken.get(reader.id);
        // An endpoint that filled its room stops after the last event it took, and reads the rest
        // of this batch again once it has room: nothing is skipped.
        const next = took && took.count >= reader.room ? took.last : end;
        if (compareCursors(next, reader.position) !== 0) moved.push({ id: reader.id, position: next });
        deliveries += took?.queued ?? 0;
      }
    }
    if (moved.length > 0) {
      await t.execute(
        sql`update webhook_endpoints w
            set fan_out_xid = m.xid::xid8, fan_out_event_id = m.event_id
            from unnest(${pgArrayLiteral(moved.map((each) => each.id))}::uuid[],
                        ${pgArrayLiteral(moved.map((each) => each.position.xid))}::text[],
                        ${pgArrayLiteral(moved.map((each) => each.position.id))}::bigint[])
                   as m(id, xid, event_id)
            where w.id = m.id`,
      );
    }
    return { ran: true, events, deliveries, atBound: endpoints.length - readers.length, behindRetention };
  });
}

/** What one endpoint took from a batch: how many events, the last of them, how many rows were new. */
type Taken = { count: number; last: Cursor; queued: number };

type TakenRow = { endpoint_id: string; count: number; last_xid: string; last_id: string; queued: number };

/**
 * Queues, for each endpoint, its subscribed events among `eventIds` written since it was added
 * (endpoints.ts writtenSinceAdded), in log order, at most its room; one statement for the group. A
 * row that already exists (a replay queued it) counts as taken and is left as it is.
 */
async function queueDeliveries(
  db: Db,
  params: { readers: readonly Reader[]; eventIds: readonly bigint[]; firstAttemptSeconds: number },
): Promise<Map<string, Taken>> {
  const rows = await queryRows<TakenRow>(
    db,
    sql`with room as (
          select * from unnest(${pgArrayLiteral(params.readers.map((each) => each.id))}::uuid[],
                               ${pgArrayLiteral(params.readers.map((each) => each.room))}::int[])
                 as r(endpoint_id, room)),
        matched as (
          select w.id as endpoint_id, e.id as event_id, e.xid, r.room,
                 row_number() over (partition by w.id order by e.xid, e.id) as n
          from room r
          join webhook_endpoints w on w.id = r.endpoint_id
          join events e on e.id = any(${pgArrayLiteral(params.eventIds)}::bigint[])
            and e.type = any(w.event_types) and ${writtenSinceAdded}),
        taken as (select * from matched where n <= room),
        queued as (
          insert into webhook_deliveries (endpoint_id, event_id, next_attempt_at)
          select endpoint_id, event_id, now() + make_interval(secs => ${params.firstAttemptSeconds}::int)
          from taken order by endpoint_id, xid, event_id
          on conflict (endpoint_id, event_id) do nothing
          returning endpoint_id)
        select t.endpoint_id, count(*)::int as count,
               (array_agg(t.xid::text order by t.xid desc, t.event_id desc))[1] as last_xid,
               (array_agg(t.event_id::text order by t.xid desc, t.event_id desc))[1] as last_id,
               (select count(*)::int from queued q where q.endpoint_id = t.endpoint_id) as queued
        from taken t
        group by t.endpoint_id`,
  );
  return new Map(
    rows.map((row) => [
      row.endpoint_id,
      {
        count: row.count,
        last: { xid: BigInt(row.last_xid), id: BigInt(row.last_id) },
        queued: row.queued,
      },
    ]),
  );
}
