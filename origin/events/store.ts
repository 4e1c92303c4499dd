/**
 * The event log's queries (docs/events.md). None is on the money path (the triggers of migration
 * 0016 write the events), so they are plain queries, not named statements.
 */
import { type SQL, sql } from "drizzle-orm";
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
};

/**
 * The events of these agents after `after` whose transactions have all ended, in (xid, id) order:
 * one statement, so the horizon and the rows come from one snapshot.
 */
export async function readServable(db: Db, params: ReadServableParams): Promise<ReadServableResult> {
  const rows = await queryRows<EventRow & { horizon: string }>(db, servableQuery(params));
  const horizon = BigInt(rows[0]!.horizon);
  return { horizon, events: rows.filter((row) => row.id !== null).map(eventOf) };
}

/** readServable's statement (its plan is tested: origin/events/store-plan.int.test.ts). */
export function servableQuery(params: ReadServableParams): SQL {
  return sql`with h as (select pg_snapshot_xmin(pg_current_snapshot()) as horizon)
        select h.horizon::text as horizon, e.id::text as id, e.xid::text as xid, e.agent_id, e.type,
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

/** The cursor before every event not yet servable now. */
export async function currentHorizon(db: Db): Promise<Cursor> {
  const [row] = await queryRows<{ horizon: string }>(
    db,
    sql`select pg_snapshot_xmin(pg_current_snapshot())::text as horizon`,
  );
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
