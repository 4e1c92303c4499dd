import { sql } from "drizzle-orm";
import { bigint, pgTable, primaryKey, text } from "drizzle-orm/pg-core";

/**
 * How many rows of the tables the operator watches are in each state (the console's operations
 * view and the /metrics gauges, origin/metrics/state-counts.ts), kept as they change: counting
 * agent_actions or x402_settlements by state read the whole table on every scrape and every load
 * of the console, which grows with every action. `family` names the table (keys, batches,
 * actions, settlements), `a` and `b` the state (`b` is the action's status, `a` its kind; empty
 * elsewhere), `n` the rows and `keys` the keys of the batches in that state.
 *
 * The true count at any snapshot is this table's row plus its changes not folded yet
 * (stateCountChanges): statement triggers on the counted tables append the changes, in the
 * writing transaction (migration 0032); the fold (foldStateCounts) moves them here.
 */
export const stateCounts = pgTable(
  "state_counts",
  {
    family: text("family").notNull(),
    a: text("a").notNull(),
    b: text("b").notNull().default(""),
    n: bigint("n", { mode: "bigint" }).notNull(),
    keys: bigint("keys", { mode: "bigint" }).notNull().default(sql`0`),
  },
  (t) => [primaryKey({ columns: [t.family, t.a, t.b] })],
);

/**
 * Changes to stateCounts not folded in yet, one row per statement and state it changed. Only
 * appended to by the writers, so two writers never wait on each other here; the fold deletes what
 * it moves, in one transaction with its move.
 */
export const stateCountChanges = pgTable("state_count_changes", {
  family: text("family").notNull(),
  a: text("a").notNull(),
  b: text("b").notNull().default(""),
  n: bigint("n", { mode: "bigint" }).notNull(),
  keys: bigint("keys", { mode: "bigint" }).notNull().default(sql`0`),
});
