/**
 * The planner's settings of the outbox's own transactions, and of any read that must reach its rows
 * through an index whatever the tables held when a connection planned it (the approved transfers,
 * actions/approved.ts): plans that reach rows through an index, by key, as each of their statements
 * means to (a batch's items and rows, the transactions a receipt names, the domain rows that follow
 * them). Each statement is prepared once per
 * connection and its generic plan is kept. Planned while the tables were nearly empty, with only
 * sequential and bitmap scans off, the money claim and store read agent_actions whole (bench:money
 * 0.76× → 0.60× of the straight rate until those two were off), and the plans still joined by hash
 * over a whole index: the x402 store read x402_settlements' primary key end to end, and the
 * receipts' statement read outgoing_transactions and x402_settlements whole, once a batch, for as
 * long as the plan lived (docs/performance.md, "x402 settlement"). With hash and merge joins off
 * too, every join is a loop of index probes, a few per row of the batch.
 */
import { sql } from "drizzle-orm";
import type { Db } from "./client.ts";
import { openPipelinedTransaction } from "./pipelined-transaction.ts";
import { type Columns, type PreparedStatement, preparedStatement, type RowOf } from "./prepared.ts";

export const byKeyStatement = preparedStatement<never>(
  "plan_by_key",
  sql`select set_config('enable_seqscan', 'off', true) as seqscan,
        set_config('enable_bitmapscan', 'off', true) as bitmapscan,
        set_config('enable_hashjoin', 'off', true) as hashjoin,
        set_config('enable_mergejoin', 'off', true) as mergejoin`,
).returns({ seqscan: "text", bitmapscan: "text", hashjoin: "text", mergejoin: "text" });

/**
 * Runs one statement in a transaction of its own under byKeyStatement's settings: `begin`, the
 * settings, the statement and `commit` leave in one write (pipelined) and answer in one round trip.
 */
export async function runByKey<P extends string, C extends Columns>(
  db: Db,
  statement: PreparedStatement<P, C>,
  values: Record<P, unknown>,
): Promise<RowOf<C>[]> {
  const tx = await openPipelinedTransaction(db);
  try {
    const [, rows] = await Promise.all([tx.run(byKeyStatement, {}), tx.run(statement, values)]);
    await tx.commit();
    return rows;
  } catch (error) {
    await tx.rollback();
    throw error;
  }
}
