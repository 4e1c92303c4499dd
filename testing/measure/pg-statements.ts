/**
 * What Postgres executed during a bench's phase, by statement, from `pg_stat_statements`: the
 * benches that own their Postgres start it with the extension loaded when BENCH_PG_STATEMENTS is
 * set (docs/development.md), and print, for each phase, the statements that took the most of its
 * execution time, per operation the phase completed.
 */
import pg from "pg";

/** How many statements each phase's table shows: BENCH_PG_STATEMENTS=<n>; undefined when off. */
export function statementsToShow(value = process.env.BENCH_PG_STATEMENTS): number | undefined {
  if (value === undefined || value === "") return undefined;
  const count = Number(value);
  if (!Number.isInteger(count) || count < 1) {
    throw new Error(`BENCH_PG_STATEMENTS must be a whole number of statements to show, not "${value}"`);
  }
  return count;
}

/**
 * Server settings that load the extension. Nested statements (those a trigger or a function runs)
 * are tracked too, so a trigger's cost shows as its own rows as well as inside its statement's.
 */
export const PG_STATEMENTS_SETTINGS: Readonly<Record<string, string>> = {
  shared_preload_libraries: "pg_stat_statements",
  "pg_stat_statements.track": "all",
  "pg_stat_statements.max": "2000",
};

/** One statement's counters: cumulative since the extension's reset, in one database. */
export type StatementCounters = {
  query: string;
  toplevel: boolean;
  calls: number;
  execMs: number;
  planMs: number;
  rows: number;
  sharedHits: number;
  sharedReads: number;
  walRecords: number;
};

/** Counters by statement (query id and whether it ran at top level). */
export type StatementSnapshot = Map<string, StatementCounters>;

export type StatementMeter = {
  snapshot(): Promise<StatementSnapshot>;
  close(): Promise<void>;
};

/**
 * Opens its own connection to `url` (a superuser's: it creates the extension in that database if
 * it is not there, and leaves its own reads uncounted) and reads that database's statements on each
 * snapshot.
 */
export async function openStatementMeter(url: string): Promise<StatementMeter> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query("create extension if not exists pg_stat_statements");
    // The meter's own reads are not the phase's.
    await client.query("set pg_stat_statements.track = none");
  } catch (error) {
    await client.end();
    throw error;
  }
  return {
    async snapshot() {
      const { rows } = await client.query<{
        key: string;
        query: string;
        toplevel: boolean;
        calls: string;
        exec_ms: number;
        plan_ms: number;
        rows: string;
        hits: string;
        reads: string;
        wal: string;
      }>(
        `select queryid::text || ':' || toplevel::text as key, query, toplevel, calls::text,
                total_exec_time as exec_ms, total_plan_time as plan_ms, rows::text,
                shared_blks_hit::text as hits, shared_blks_read::text as reads, wal_records::text as wal
           from pg_stat_statements
          where dbid = (select oid from pg_database where datname = current_database())`,
      );
      return new Map(
        rows.map((row) => [
          row.key,
          {
            query: row.query,
            toplevel: row.toplevel,
            calls: Number(row.calls),
            execMs: row.exec_ms,
            planMs: row.plan_ms,
            rows: Number(row.rows),
            sharedHits: Number(row.hits),
            sharedReads: Number(row.reads),
            walRecords: Number(row.wal),
          },
        ]),
      );
    },
    close: () => client.end(),
  };
}

/** What each statement did between two snapshots; statements that did not run are left out. */
export function statementDelta(before: StatementSnapshot, after: StatementSnapshot): StatementCounters[] {
  const delta: StatementCounters[] = [];
  for (const [key, now] of after) {
    const then = before.get(key);
    const calls = now.calls - (then?.calls ?? 0);
    if (calls <= 0) continue;
    delta.push({
      query: now.query,
      toplevel: now.toplevel,
      calls,
      execMs: now.execMs - (then?.execMs ?? 0),
      planMs: now.planMs - (then?.planMs ?? 0),
      rows: now.rows - (then?.rows ?? 0),
      sharedHits: now.sharedHits - (then?.sharedHits ?? 0),
      sharedReads: now.sharedReads - (then?.sharedReads ?? 0),
      walRecords: now.walRecords - (then?.walRecords ?? 0),
    });
  }
  return delta;
}

/** Adds one phase's delta to another's (the same phase over several rounds). */
export function addStatements(total: StatementCounters[], more: StatementCounters[]): StatementCounters[] {
  const byKey = new Map(total.map((row) => [`${row.toplevel}:${row.query}`, { ...row }]));
  for (const row of more) {
    const key = `${row.toplevel}:${row.query}`;
    const sum = byKey.get(key);
    if (!sum) {
      byKey.set(key, { ...row });
      continue;
    }
    sum.calls += row.calls;
    sum.execMs += row.execMs;
    sum.planMs += row.planMs;
    sum.rows += row.rows;
    sum.sharedHits += row.sharedHits;
    sum.sharedReads += row.sharedReads;
    sum.walRecords += row.walRecords;
  }
  return [...byKey.values()];
}

const QUERY_WIDTH = 110;

/** A query on one line, cut to fit a table row. */
function oneLine(query: string): string {
  const flat = query.replace(/\s+/g, " ").trim();
  return flat.length > QUERY_WIDTH ? `${flat.slice(0, QUERY_WIDTH - 1)}…` : flat;
}

/**
 * The phase's statements as lines: first the top-level totals per operation, then the `top`
 * statements by execution time (nested ones marked), each per operation and per call.
 */
export function describeStatements(
  rows: readonly StatementCounters[],
  operations: number,
  unit: string,
  top: number,
): string[] {
  const per = (value: number): string => (value / operations).toFixed(3);
  const toplevel = rows.filter((row) => row.toplevel);
  const sum = (pick: (row: StatementCounters) => number): number =>
    toplevel.reduce((total, row) => total + pick(row), 0);
  const lines = [
    `      top-level statements a ${unit} ${per(sum((row) => row.calls))}, executing ${per(sum((row) => row.execMs))} ms ` +
      `(planning ${per(sum((row) => row.planMs))} ms), ${per(sum((row) => row.sharedHits))} buffer hits, ` +
      `${per(sum((row) => row.sharedReads))} blocks read in, ${per(sum((row) => row.walRecords))} WAL records (${operations} ${unit}s)`,
    `      ms a ${unit} | calls a ${unit} | ms a call | hits a call | WAL a call | statement`,
  ];
  const byTime = [...rows].sort((a, b) => b.execMs - a.execMs).slice(0, top);
  for (const row of byTime) {
    lines.push(
      `      ${per(row.execMs)} | ${per(row.calls)} | ${(row.execMs / row.calls).toFixed(3)} | ${(row.sharedHits / row.calls).toFixed(1)} | ` +
        `${(row.walRecords / row.calls).toFixed(1)} | ${row.toplevel ? "" : "(nested) "}${oneLine(row.query)}`,
    );
  }
  return lines;
}

/** A bench's phases' statements, by phase name, summed over the rounds of each. */
export type PhaseStatements = {
  /** Runs `phase`, adding what Postgres executed meanwhile to `name`'s total (nothing when off). */
  during<T>(name: string, phase: () => Promise<T>): Promise<T>;
  /** `name`'s statements as describeStatements gives them; no lines when off or never run. */
  describe(name: string, operations: number, unit: string): string[];
  close(): Promise<void>;
};

/**
 * BENCH_PG_STATEMENTS's view of a bench's phases, reading the database at `url` (whose server was
 * started with PG_STATEMENTS_SETTINGS); with `top` undefined (the variable unset) it does nothing.
 */
export async function phaseStatements(url: string, top: number | undefined): Promise<PhaseStatements> {
  if (top === undefined) {
    return { during: (_name, phase) => phase(), describe: () => [], close: async () => {} };
  }
  const meter = await openStatementMeter(url);
  const totals = new Map<string, StatementCounters[]>();
  return {
    async during(name, phase) {
      const before = await meter.snapshot();
      const result = await phase();
      totals.set(name, addStatements(totals.get(name) ?? [], statementDelta(before, await meter.snapshot())));
      return result;
    },
    describe(name, operations, unit) {
      const rows = totals.get(name);
      return rows && operations > 0 ? describeStatements(rows, operations, unit, top) : [];
    },
    close: () => meter.close(),
  };
}
