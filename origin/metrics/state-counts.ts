import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../db/client.ts";

/** Rows per state of the tables an operator watches, read in one statement (one snapshot). */
export type StateCounts = {
  /** key_pool rows by status (free, pending, assigned, quarantined). */
  keys: { state: string; count: number }[];
  /** key_batches by status, with the keys they hold. */
  batches: { state: string; count: number; keys: number }[];
  /** identity_findings by class, with the latest. */
  findings: { class: string; count: number; lastAt: string | null }[];
  /** agent_actions by kind and status. */
  actions: { kind: string; state: string; count: number }[];
  /**
   * x402_settlements by status, whatever statuses the table holds: read generically so a change
   * of its state machine needs no change here.
   */
  settlements: { state: string; count: number }[];
  /**
   * Units the agents with a spending policy have used of their budgets today (UTC), by kind
   * (transfer, x402): reserved when signed, and never given back by a refund or a payout.
   */
  budgets: { kind: string; units: string }[];
};

type Row = {
  family: string;
  a: string;
  b: string | null;
  n: number;
  m: number | null;
  at: Date | null;
  units: string | null;
};

export async function readStateCounts(db: Db): Promise<StateCounts> {
  const rows = await queryRows<Row>(
    db,
    sql`select 'keys' as family, status as a, null::text as b, count(*)::int as n, null::int as m,
               null::timestamptz as at, null::text as units
          from key_pool group by status
        union all
        select 'batches', status, null, count(*)::int, coalesce(sum(size), 0)::int, null, null
          from key_batches group by status
        union all
        select 'findings', class, null, count(*)::int, null, max(at), null from identity_findings group by class
        union all
        select 'actions', kind, status, count(*)::int, null, null, null from agent_actions group by kind, status
        union all
        select 'settlements', status::text, null, count(*)::int, null, null, null
          from x402_settlements group by status
        union all
        select 'budgets', 'transfer', null, 0, null, null, coalesce(sum(s.spent_units), 0)::text
          from transfer_daily_spend s join agent_policies p using (agent_id)
          where s.day = (now() at time zone 'utc')::date
        union all
        select 'budgets', 'x402', null, 0, null, null, coalesce(sum(a.units), 0)::text
          from x402_daily_authorizations a join agent_policies p using (agent_id)
          where a.day = (now() at time zone 'utc')::date
        order by 1, 2, 3`,
  );
  const counts: StateCounts = {
    keys: [],
    batches: [],
    findings: [],
    actions: [],
    settlements: [],
    budgets: [],
  };
  for (const row of rows) {
    switch (row.family) {
      case "keys":
        counts.keys.push({ state: row.a, count: row.n });
        break;
      case "batches":
        counts.batches.push({ state: row.a, count: row.n, keys: row.m ?? 0 });
        break;
      case "findings":
        counts.findings.push({
          class: row.a,
          count: row.n,
          lastAt: row.at ? new Date(row.at).toISOString() : null,
        });
        break;
      case "actions":
        counts.actions.push({ kind: row.a, state: row.b ?? "", count: row.n });
        break;
      case "budgets":
        counts.budgets.push({ kind: row.a, units: row.units ?? "0" });
        break;
      default:
        counts.settlements.push({ state: row.a, count: row.n });
    }
  }
  return counts;
}
