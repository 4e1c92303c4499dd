import { sql } from "drizzle-orm";

/**
 * A CTE for a one-statement write whose commit need not wait for the WAL flush (synchronous_commit
 * off, for its own transaction only). Postgres still writes the WAL within its walwriter delay, and
 * any later synchronous commit flushes this one with it (the WAL is one sequence), so only a crash
 * of the database itself in that moment can lose it: each caller says why that loss is harmless.
 * The statement must read the CTE for it to run.
 */
export const NO_FLUSH_WAIT = sql`no_flush_wait as materialized (
  select set_config('synchronous_commit', 'off', true) as setting)`;
