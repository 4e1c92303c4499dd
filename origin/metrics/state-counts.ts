import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../db/client.ts";

/**
 * Rows per state of the tables an operator watches, read in one statement (one snapshot). The keys,
 * batches, actions and settlements come from the counts their tables' triggers keep (migration
 * 0032, schema/state-counts.ts): the folded counts plus the changes not folded yet, which together
 * are exact at any snapshot; the findings (a few per agent) and today's budgets are read as they are.
 */
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
    sql`select family, a, nullif(b, '') as b, sum(n)::int as n, sum(keys)::int as m,
               null::timestamptz as at, null::text as units
          from (select family, a, b, n, keys from state_counts
                union all select family, a, b, n, keys from state_count_changes) c
          group by family, a, b having sum(n) > 0
        union all
        select 'findings', class, null, count(*)::int, null, max(at), null from identity_findings group by class
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

/** The advisory lock key of the fold ("stat" in ASCII), one per database. */
export const STATE_COUNTS_FOLD_LOCK = 0x73746174;

/**
 * Moves the changes the triggers appended into state_counts, in one transaction: what a reader
 * sums stays the same at every snapshot, and only the changes committed before the fold's
 * statement are moved (later ones wait for the next fold). One fold at a time in the database
 * (a transaction-scoped advisory lock: another origin's fold skips its turn), so two folds never
 * update the same counts in different orders. Resolves with the changes moved, or null when it
 * skipped its turn.
 */
export async function foldStateCounts(db: Db): Promise<number | null> {
  return db.transaction(async (tx) => {
    const t = tx as unknown as Db;
    const [lock] = await queryRows<{ locked: boolean }>(
      t,
      sql`select pg_try_advisory_xact_lock(${STATE_COUNTS_FOLD_LOCK}) as locked`,
    );
    if (!lock?.locked) return null;
    const [moved] = await queryRows<{ changes: number }>(
      t,
      sql`with moved as (delete from state_count_changes returning family, a, b, n, keys),
            summed as (select family, a, b, sum(n) as n, sum(keys) as keys, count(*) as changes
                       from moved group by family, a, b),
            folded as (insert into state_counts (family, a, b, n, keys)
                       select family, a, b, n, keys from summed
                       on conflict (family, a, b) do update
                         set n = state_counts.n + excluded.n, keys = state_counts.keys + excluded.keys)
          select coalesce(sum(changes), 0)::int as changes from summed`,
    );
    return moved?.changes ?? 0;
  });
}
