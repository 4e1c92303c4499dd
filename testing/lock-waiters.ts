/**
 * Waiting until the statement a test means is blocked on the lock the test holds, and not merely
 * until something is. The files of a run share one Postgres (each its own database), and the
 * origin's own workers (tracker, sweeps, outbox batches) wait on locks of their own: a wait for
 * "any session waiting on a lock" goes on when one of them does, before the request under test
 * reached the lock, and the test then passes without the interleaving it names. So a waiter counts
 * here only if it is in this database, is blocked by the holder's session (directly, or behind
 * another waiter queued on the same row, which is how a second waiter on a row is blocked), and
 * runs the statement of the code path under test.
 */
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../origin/db/client.ts";
import { sleep } from "../shared/sleep.ts";

export type BlockedByParams = {
  /** The backend pid of the session holding the lock (backendPid inside its transaction). */
  holder: number;
  /** A Postgres regular expression the waiting statement's text matches (pg_stat_activity.query). */
  statement: string;
};

export type WaitUntilBlockedByParams = BlockedByParams & {
  /** What is waited for, in the error when it never happens. */
  what: string;
  /** How many such statements, at least (1 unless given). */
  count?: number;
  timeoutMs?: number;
};

/** The backend pid of the session `db` runs on: a transaction's, passed its `tx`. */
export async function backendPid(db: Db): Promise<number> {
  const [row] = await queryRows<{ pid: number }>(db, sql`select pg_backend_pid() as pid`);
  return row!.pid;
}

/** How many sessions of this database running `statement` are blocked, directly or not, by `holder`. */
export async function blockedBy(db: Db, params: BlockedByParams): Promise<number> {
  const [row] = await queryRows<{ n: number }>(
    db,
    sql`with recursive waiting as materialized (
          select pid, query, pg_blocking_pids(pid) as blockers from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock'),
        behind (pid) as (
          select pid from waiting where ${params.holder}::int = any(blockers)
          union
          select w.pid from waiting w join behind b on b.pid = any(w.blockers))
        select count(*)::int as n from waiting
        where pid in (select pid from behind) and query ~ ${params.statement}`,
  );
  return row!.n;
}

/**
 * Every lock wait of this database, for the error: who waits, on whom, and the head of its
 * statement (statements are parameterised; the head names the code path, not its values).
 */
async function lockWaits(db: Db): Promise<{ pid: number; blockers: number[]; statement: string }[]> {
  return queryRows(
    db,
    sql`select pid, pg_blocking_pids(pid) as blockers, left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 48) as statement
        from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`,
  );
}

/** Resolves once `count` statements are blocked by `holder`; throws naming `what` if not in time. */
export async function waitUntilBlockedBy(db: Db, params: WaitUntilBlockedByParams): Promise<void> {
  const count = params.count ?? 1;
  const timeoutMs = params.timeoutMs ?? 60_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const blocked = await blockedBy(db, params);
    if (blocked >= count) return;
    if (Date.now() > deadline) {
      throw new Error(
        `never: ${params.what} (${blocked} of ${count} statements matching /${params.statement}/ ` +
          `blocked by session ${params.holder} after ${timeoutMs} ms; lock waits of this database: ` +
          `${JSON.stringify(await lockWaits(db))})`,
      );
    }
    await sleep(50);
  }
}
