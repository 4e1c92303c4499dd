import { sql } from "drizzle-orm";
import type { NodeCharts } from "../../shared/console-charts-schema.ts";
import { type Db, queryRows } from "../db/client.ts";
import { poolStock } from "../keypool/batch-repository.ts";
import { getRegistrationPolicy } from "../registration/policy-repository.ts";

/**
 * The console's charts' database reads (docs/operations.md#the-node-in-charts). Each reads a time
 * range of an index (migration 0025) and groups in SQL, so its cost follows the window's rows, not
 * the table's: a node with a year of actions reads one hour of them.
 */

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const iso = (value: Date | string): string => new Date(value).toISOString();

/** The fixed UTC buckets ending with the one holding `now`: `count` of `sizeMs` each. */
export type Window = { from: Date; to: Date; starts: Date[] };

export function fixedWindow(now: Date, sizeMs: number, count: number): Window {
  const last = Math.floor(now.getTime() / sizeMs) * sizeMs;
  const starts = Array.from({ length: count }, (_, i) => new Date(last - (count - 1 - i) * sizeMs));
  return { from: starts[0]!, to: new Date(last + sizeMs), starts };
}

export const minuteWindow = (now: Date): Window => fixedWindow(now, MINUTE_MS, 60);
export const hourWindow = (now: Date): Window => fixedWindow(now, HOUR_MS, 24);

/** Identities issued and admission attempts (all groups) per UTC hour of `window`. */
export async function readRegistrationsByHour(
  db: Db,
  window: Window,
): Promise<Map<string, { issued: number; attempts: number }>> {
  const rows = await queryRows<{ start: Date; issued: number; attempts: number }>(
    db,
    sql`with hours as (
          select generate_series(${iso(window.from)}::timestamptz, ${iso(window.to)}::timestamptz - interval '1 hour',
                                 interval '1 hour') as start
        ), issued as (
          select date_trunc('hour', issued_at, 'UTC') as start, count(*)::int as n from registration_issued
          where issued_at >= ${iso(window.from)} and issued_at < ${iso(window.to)} group by 1
        ), attempts as (
          select date_trunc('hour', minute, 'UTC') as start, sum(count)::int as n from registration_attempts
          where ip_group = '*' and minute >= ${iso(window.from)} and minute < ${iso(window.to)} group by 1
        )
        select h.start, coalesce(i.n, 0) as issued, coalesce(a.n, 0) as attempts
        from hours h left join issued i using (start) left join attempts a using (start)
        order by h.start`,
  );
  return new Map(rows.map((row) => [iso(row.start), { issued: row.issued, attempts: row.attempts }]));
}

/**
 * Actions created per UTC minute of `window`, by kind and their state now. The range is read on
 * agent_actions_updated_idx: an action's updated_at is never before its created_at, so every action
 * created in the window was updated in it or after.
 */
export async function readActionsByMinute(db: Db, window: Window): Promise<NodeCharts["actions"]["buckets"]> {
  const rows = await queryRows<{ start: Date; kind: string; state: string; count: number }>(
    db,
    sql`select date_trunc('minute', created_at, 'UTC') as start, kind, status as state, count(*)::int as count
        from agent_actions
        where updated_at >= ${iso(window.from)} and created_at >= ${iso(window.from)}
          and created_at < ${iso(window.to)}
        group by 1, 2, 3 order by 1, 2, 3`,
  );
  const byStart = new Map<string, NodeCharts["actions"]["buckets"][number]["counts"]>();
  for (const row of rows) {
    const key = iso(row.start);
    const counts = byStart.get(key) ?? [];
    counts.push({ kind: row.kind, state: row.state, count: row.count });
    byStart.set(key, counts);
  }
  return window.starts.map((start) => ({ start: iso(start), counts: byStart.get(iso(start)) ?? [] }));
}

/**
 * From creation to confirmation, in whole milliseconds of the rows' own timestamps, for the
 * transfers confirmed and the settlements settled in `window` (p50, p99: the nearest rank, a
 * duration that happened). A settlement is read on its created_at index from an hour before the
 * window: an authorization is valid for minutes (AGENT_X402_MAX_TIMEOUT_SECONDS), never an hour.
 */
export async function readTimeToConfirmation(
  db: Db,
  window: Window,
): Promise<Pick<NodeCharts["time_to_confirmation"], "transfers" | "settlements">> {
  const rows = await queryRows<{ kind: string; count: number; p50: number | null; p99: number | null }>(
    db,
    sql`with durations as (
          select 'transfer' as kind, round(extract(epoch from updated_at - created_at) * 1000)::int as ms
          from agent_actions
          where updated_at >= ${iso(window.from)} and updated_at < ${iso(window.to)}
            and kind = 'transfer' and status = 'confirmed'
          union all
          select 'settlement', round(extract(epoch from updated_at - created_at) * 1000)::int
          from x402_settlements
          where created_at >= ${iso(window.from)}::timestamptz - interval '1 hour'
            and created_at < ${iso(window.to)}
            and updated_at >= ${iso(window.from)} and updated_at < ${iso(window.to)} and status = 'settled'
        )
        select kind, count(*)::int as count,
               percentile_disc(0.5) within group (order by ms) as p50,
               percentile_disc(0.99) within group (order by ms) as p99
        from durations group by kind`,
  );
  const of = (kind: string) => {
    const row = rows.find((each) => each.kind === kind);
    return { count: row?.count ?? 0, p50_ms: row?.p50 ?? null, p99_ms: row?.p99 ?? null };
  };
  return { transfers: of("transfer"), settlements: of("settlement") };
}

/** Identity findings recorded in `window`, by class. */
export async function readFindingsByClass(
  db: Db,
  window: Window,
): Promise<NodeCharts["findings"]["by_class"]> {
  return queryRows<{ class: string; count: number }>(
    db,
    sql`select class, count(*)::int as count from identity_findings
        where at >= ${iso(window.from)} and at < ${iso(window.to)}
        group by class order by class`,
  );
}

/** Verified free keys now, and the reserve registration keeps. */
export async function readKeyStock(db: Db): Promise<NodeCharts["key_stock"]> {
  const [stock, policy] = await Promise.all([poolStock(db), getRegistrationPolicy(db)]);
  return { free: stock.free, reserve: policy.keyReserve };
}
