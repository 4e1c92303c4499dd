/**
 * A transaction whose statements are written without waiting for the ones before them to answer
 * (the pg driver's pipeline mode, db/client.ts): `begin` and the first statements share one round
 * trip, and so do the last statement and `commit`. Postgres still runs them one after another, in
 * order, each seeing what the ones before it did. A statement that fails aborts the transaction,
 * so whatever was written behind it fails too (and `commit` rolls back): nothing after a failure
 * takes effect. On a driver without pipelining (Neon's), each statement waits for the one before
 * and none is sent after a failure.
 */
import type { Db } from "./client.ts";
import {
  type Columns,
  driverClient,
  type PreparedStatement,
  type Queryable,
  queryPrepared,
  type RowOf,
} from "./prepared.ts";

type PoolClient = Queryable & {
  pipeline?: boolean;
  /** pg's connection: its socket, corked while a turn's statements are written (coalescing below). */
  connection?: { stream?: { cork(): void; uncork(): void } };
  query(text: string): Promise<{ command?: string }>;
  release(error?: Error): void;
};

export type PipelinedTransaction = {
  /** Writes `statement` behind everything written before it; resolves with its rows. */
  run<P extends string, C extends Columns>(
    statement: PreparedStatement<P, C>,
    values: Record<P, unknown>,
  ): Promise<RowOf<C>[]>;
  /** Writes `commit` behind the statements run so far; rejects (rolled back) unless it committed. */
  commit(): Promise<void>;
  /** Ends the transaction without its changes. */
  rollback(): Promise<void>;
};

/**
 * Takes a connection from `db`'s pool and writes `begin` on it, not waited for: the first `run`
 * follows it on the wire. The caller ends the transaction with `commit` or `rollback`; either
 * returns the connection to the pool.
 */
export async function openPipelinedTransaction(db: Db): Promise<PipelinedTransaction> {
  const pool = driverClient<{ connect(): Promise<PoolClient> }>(db);
  const client = await pool.connect();
  const pipelined = client.pipeline === true;
  /** Settles once everything written so far has answered. */
  let tail: Promise<unknown> = Promise.resolve();
  let failure: unknown;
  const coalesce = coalescingWrites(client);
  const write = <T>(send: () => Promise<T>): Promise<T> => {
    if (pipelined) coalesce();
    const sent = pipelined
      ? send()
      : tail.then(() => (failure === undefined ? send() : Promise.reject(failure)));
    tail = sent.then(
      () => {},
      (error: unknown) => {
        failure ??= error;
      },
    );
    return sent;
  };
  // Every statement's caller also waits for `begin`: a statement is only trusted inside it.
  const begun = write(() => client.query("begin"));
  let released = false;
  const release = (error?: Error): void => {
    if (released) return;
    released = true;
    client.release(error);
  };
  let rolledBack: Promise<void> | undefined;
  const rollback = (): Promise<void> => {
    rolledBack ??= (async () => {
      if (released) return;
      await tail;
      try {
        await client.query("rollback");
        release();
      } catch (error) {
        // The connection is in an unknown state: the pool drops it.
        release(error instanceof Error ? error : new Error(String(error)));
      }
    })();
    return rolledBack;
  };
  return {
    async run(statement, values) {
      const [, rows] = await Promise.all([begun, write(() => queryPrepared(client, statement, values))]);
      return rows;
    },
    async commit() {
      try {
        const [, result] = await Promise.all([begun, write(() => client.query("commit"))]);
        // A transaction aborted by a failed statement answers `commit` with ROLLBACK.
        if (result.command !== "COMMIT") throw new Error(`the transaction ended with ${result.command}`);
        release();
      } catch (error) {
        await rollback();
        throw error;
      }
    },
    rollback,
  };
}

/**
 * pg writes each statement to the socket as it is issued: one system call apiece, and on this
 * kind of shared VM each one that wakes the Postgres backend cost about 50 µs of the origin's CPU,
 * a fifth of its busy time on the x402 path. Corked from the first statement of a turn until the
 * turn's ticks have run, the statements issued together (`begin` and the first ones, the last and
 * `commit`) leave in one write. Nothing waits longer than the turn: an answer is only awaited once
 * its statement is on the wire. A no-op where the driver has no socket to cork (Neon's).
 */
function coalescingWrites(client: PoolClient): () => void {
  const socket = client.connection?.stream;
  let corked = false;
  return () => {
    if (!socket || corked) return;
    corked = true;
    socket.cork();
    process.nextTick(() => {
      corked = false;
      socket.uncork();
    });
  };
}
