/**
 * The event log's queries (docs/events.md). None is on the money path (the triggers of migration
 * 0016 write the events), so they are plain queries, not named statements.
 */
import { type SQL, sql } from "drizzle-orm";
import { sleep } from "../../shared/sleep.ts";
import { type Db, pgArrayLiteral, queryRows } from "../db/client.ts";
import { type Cursor, horizonCursor } from "./cursor.ts";

/** One event as the stream and the wait hand it on. */
export type LoggedEvent = {
  id: bigint;
  xid: bigint;
  /** Null for a node's own event (`registration.*`): the webhooks' fan-out reads those, never a stream. */
  agentId: string | null;
  type: string;
  /** ISO 8601 with milliseconds and `Z`, as the action view prints its times. */
  occurredAt: string;
  data: unknown;
};

type EventRow = {
  id: string;
  xid: string;
  agent_id: string | null;
  type: string;
  occurred_at: string;
  data: unknown;
};

const eventOf = (row: EventRow): LoggedEvent => ({
  id: BigInt(row.id),
  xid: BigInt(row.xid),
  agentId: row.agent_id,
  type: row.type,
  occurredAt: row.occurred_at,
  data: row.data,
});

export type ReadServableParams = {
  /** These agents' events; every event of the log (node events too) when undefined (the webhooks' fan-out). */
  agentIds: readonly string[] | undefined;
  after: Cursor;
  limit: number;
  /**
   * False: the events' places only (id, xid, agent, type, time), `data` null, for a reader that
   * needs no more (the webhooks' fan-out); the data is most of what a read moves.
   */
  withData?: boolean;
};

export type ReadServableResult = {
  events: LoggedEvent[];
  /**
   * The oldest transaction still running when the read's snapshot was taken: every event of a
   * transaction below it was visible to the read, and none can still appear.
   */
  horizon: bigint;
  /** Where the read's snapshot stands in the write-ahead log, for untilOnDisk. */
  wal: WalMark;
};

/**
 * Where the write-ahead log ended when a read's snapshot was taken (every transaction the read saw
 * end had written its end there), and whether the disk already held it then.
 */
export type WalMark = { end: string; onDisk: boolean };

/**
 * Resolves once the database's disk holds its log up to `mark`: then no transaction a read saw end
 * can be lost, nor its id handed to another. A commit that does not wait for the flush
 * (db/no-flush-wait.ts: the outbox's moves, a settlement's receipt) is visible, and below the
 * horizon, before it is on disk; if the database then crashes, it is lost and recovery hands its
 * transaction id, and often its events' ids, to the next transactions. A stream that had served
 * its event, or moved its cursor past its id, would skip those for good (their ids sort at or
 * below the cursor): so nothing is served, and no cursor moves, past a read until its mark is on
 * disk. Postgres flushes such commits within its `wal_writer_delay` (200 ms by default), and any
 * commit that waits for the flush flushes them with its own, which under load is every few ms.
 */
export async function untilOnDisk(db: Db, mark: WalMark): Promise<void> {
  if (mark.onDisk) return;
  for (;;) {
    const [row] = await queryRows<{ on_disk: boolean }>(
      db,
      sql`select pg_current_wal_flush_lsn() >= ${mark.end}::pg_lsn as on_disk`,
    );
    if (row!.on_disk) return;
    await sleep(WAL_POLL_MS);
  }
}

/** How often untilOnDisk asks again: a small share of the walwriter's 200 ms. */
const WAL_POLL_MS = 10;

/** The columns of a read's WalMark, from its snapshot's CTE `h` (`wal_end`). */
const WAL_MARK_COLUMNS = sql`h.wal_end::text as wal_end, pg_current_wal_flush_lsn() >= h.wal_end as wal_on_disk`;
type WalMarkRow = { wal_end: string; wal_on_disk: boolean };
const walMarkOf = (row: WalMarkRow): WalMark => ({ end: row.wal_end, onDisk: row.wal_on_disk });

/**
 * The events of these agents after `after` whose transactions have all ended, in (xid, id) order:
 * one statement, so the horizon and the rows come from one snapshot. A reader that serves them, or
 * keeps a place past them, waits for `untilOnDisk(wal)` first.
 */
export async function readServable(db: Db, params: ReadServableParams): Promise<ReadServableResult> {
  const rows = await queryRows<EventRow & { horizon: string } & WalMarkRow>(db, servableQuery(params));
  const horizon = BigInt(rows[0]!.horizon);
  return { horizon, wal: walMarkOf(rows[0]!), events: rows.filter((row) => row.id !== null).map(eventOf) };
}

/** readServable's statement (its plan is tested: origin/events/store-plan.int.test.ts). */
export function servableQuery(params: ReadServableParams): SQL {
  // The log's insert position is read after the snapshot is taken, so it is at or past the end of
  // every transaction the snapshot sees as ended.
  return sql`with h as materialized (
          select pg_snapshot_xmin(pg_current_snapshot()) as horizon, pg_current_wal_insert_lsn() as wal_end)
        select h.horizon::text as horizon, ${WAL_MARK_COLUMNS}, e.id::text as id, e.xid::text as xid, e.agent_id, e.type,
               js_iso_timestamp(e.occurred_at) as occurred_at,
               ${params.withData === false ? sql`null::jsonb` : sql`e.data`} as data
        from h left join lateral (
          select * from events
          where ${params.agentIds ? sql`agent_id = any(${pgArrayLiteral(params.agentIds)}::uuid[])` : sql`true`}
            and (xid, id) > (${params.after.xid.toString()}::xid8, ${params.after.id.toString()}::bigint)
            and xid < h.horizon
          order by xid, id
          limit ${params.limit}) e on true
        order by e.xid, e.id`;
}

export type ReadBacklogParams = {
  agentId: string;
  after: Cursor;
  /** Inclusive: the feed's cursor when the stream joined it (every event up to it has ended). */
  through: Cursor;
  limit: number;
};

/**
 * One agent's events in (after, through], in order, at most `limit`. The order names the table's
 * columns: a bare `id` or `xid` there would be the select list's text of the same name, and "100"
 * sorts before "99".
 */
export async function readBacklog(db: Db, params: ReadBacklogParams): Promise<LoggedEvent[]> {
  const rows = await queryRows<EventRow>(
    db,
    sql`select id::text as id, xid::text as xid, agent_id, type,
               js_iso_timestamp(occurred_at) as occurred_at, data
        from events
        where agent_id = ${params.agentId}::uuid
          and (xid, id) > (${params.after.xid.toString()}::xid8, ${params.after.id.toString()}::bigint)
          and (xid, id) <= (${params.through.xid.toString()}::xid8, ${params.through.id.toString()}::bigint)
        order by events.xid, events.id
        limit ${params.limit}`,
  );
  return rows.map(eventOf);
}

/**
 * Where the agent's event `id` sits in the log, or undefined when the log holds no such event of
 * this agent (never written, swept, or another agent's: the same answer).
 */
export async function findCursor(db: Db, agentId: string, id: bigint): Promise<Cursor | undefined> {
  const [row] = await queryRows<{ xid: string; id: string }>(
    db,
    sql`select xid::text as xid, id::text as id from events
        where id = ${id.toString()}::bigint and agent_id = ${agentId}::uuid`,
  );
  return row ? { xid: BigInt(row.xid), id: BigInt(row.id) } : undefined;
}

/**
 * The id of the agent's last event at or before `cursor` in the log's order, or 0 when it has none:
 * resuming after that id serves exactly what a stream starting at `cursor` serves (every event of
 * the agent up to `cursor` has ended, so none can still appear between the two).
 */
export async function lastEventIdThrough(db: Db, agentId: string, cursor: Cursor): Promise<bigint> {
  const [row] = await queryRows<{ id: string }>(db, lastEventIdQuery(agentId, cursor));
  return row ? BigInt(row.id) : 0n;
}

/** lastEventIdThrough's statement (its plan is tested: origin/events/store-plan.int.test.ts). */
export function lastEventIdQuery(agentId: string, cursor: Cursor): SQL {
  return sql`select id::text as id from events
        where agent_id = ${agentId}::uuid
          and (xid, id) <= (${cursor.xid.toString()}::xid8, ${cursor.id.toString()}::bigint)
        order by events.xid desc, events.id desc
        limit 1`;
}

/**
 * The cursor before every event not yet servable now, once the disk holds every transaction below
 * it (untilOnDisk: a place past a transaction a crash could still lose would skip its id's next
 * holder).
 */
export async function currentHorizon(db: Db): Promise<Cursor> {
  const [row] = await queryRows<{ horizon: string } & WalMarkRow>(
    db,
    sql`with h as materialized (
          select pg_snapshot_xmin(pg_current_snapshot()) as horizon, pg_current_wal_insert_lsn() as wal_end)
        select h.horizon::text as horizon, ${WAL_MARK_COLUMNS} from h`,
  );
  await untilOnDisk(db, walMarkOf(row!));
  return horizonCursor(BigInt(row!.horizon));
}

/** Deletes up to `limit` events older than `days` days; returns how many. */
export async function sweepOldEvents(db: Db, params: { days: number; limit: number }): Promise<number> {
  const rows = await queryRows<{ id: string }>(
    db,
    sql`delete from events where id in (
          select id from events where occurred_at < now() - make_interval(days => ${params.days}::int)
          limit ${params.limit})
        returning id`,
  );
  return rows.length;
}
