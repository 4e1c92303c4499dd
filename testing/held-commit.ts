/**
 * A commit the test holds in flight, for the tests of a commit whose answer the database link
 * loses (origin/db/lost-commit.ts). Made for the test: a deferred constraint trigger on the table
 * makes the COMMIT of any transaction that inserted into it wait for an advisory lock the test
 * holds, so the link can be cut while that commit is in Postgres's hands, not somewhere near it.
 * Nothing else of the commit changes.
 */
import { sql } from "drizzle-orm";
import type { Db } from "../origin/db/client.ts";
import { holdLock } from "./held-lock.ts";
import { waitUntilBlockedBy } from "./lock-waiters.ts";

/** A held COMMIT, as pg_stat_activity shows it. */
const COMMIT = "^(commit|COMMIT)";

export type HeldCommit<T> = {
  /** What `start` returned (the request's or the tool's answer, pending). */
  pending: T;
  /** Lets the commit go on. */
  release(): Promise<void>;
};

export type CommitHold = {
  /**
   * Takes the lock, runs `start` (the request or tool whose commit is to be held) and resolves once
   * its COMMIT waits on the lock; `what` names it if it never does.
   */
  whileCommitting<T>(what: string, start: () => T): Promise<HeldCommit<T>>;
  /** Ends the session whose COMMIT waits on the lock: Postgres rolls its transaction back. */
  endWaitingCommit(): Promise<void>;
};

/** Installs the hold on `table` (in the test's own database); `lockKey` is the advisory lock's key. */
export async function holdCommitsInserting(db: Db, table: string, lockKey: number): Promise<CommitHold> {
  const name = `hold_commit_${table}`;
  await db.execute(
    sql.raw(`
      create function ${name}() returns trigger language plpgsql as $$
      begin perform pg_advisory_xact_lock(${lockKey}); return null; end $$;
      create constraint trigger ${name} after insert on ${table}
        deferrable initially deferred for each row execute function ${name}();`),
  );
  return {
    async whileCommitting(what, start) {
      const hold = await holdLock(db, sql`select pg_advisory_xact_lock(${lockKey})`);
      const pending = start();
      await waitUntilBlockedBy(db, { holder: hold.pid, statement: COMMIT, what });
      return { pending, release: () => hold.release() };
    },
    async endWaitingCommit() {
      await db.execute(
        sql`select pg_terminate_backend(pid) from pg_stat_activity
            where datname = current_database() and wait_event_type = 'Lock' and query ~ ${COMMIT}`,
      );
    },
  };
}
