/**
 * The hot writers' wake of the event log's listeners (docs/events.md#how-events-are-written). A
 * transaction that notifies holds a lock of the whole Postgres cluster from its commit's start
 * through its WAL flush, so every notifying commit waits for the one before it, flush and all:
 * with each money statement notifying, the commits of the money path went one at a time. A
 * statement that reads `WAKE_AFTER_COMMIT` writes its events without notifying (migration 0030
 * events_wake), and its writer calls `wakeAfterCommit` once it has committed: one notification for
 * every such commit of the origin meanwhile, in a transaction that waits for no flush.
 *
 * Only for a statement on the pool or a transaction the caller commits itself: the wake goes out
 * on the pool, after the commit. A wake lost (the origin stopping, the database away) delays the
 * listeners to their next poll (origin/events/feed.ts), and loses no event.
 */
import { sql } from "drizzle-orm";
import type { Db } from "../db/client.ts";
import { preparedStatement, runPrepared } from "../db/prepared.ts";
import { EVENTS_CHANNEL } from "./listener.ts";

/**
 * A CTE that tells the event triggers of its transaction to leave the wake to the writer. The
 * statement must read it (`cross join wake_after_commit`) for it to run before the triggers do.
 */
export const WAKE_AFTER_COMMIT = sql`wake_after_commit as materialized (
  select set_config('agent.events_wake', 'after_commit', true) as setting)`;

/** The same setting as a statement of its own, for a transaction whose statements are pipelined (outbox/submit.ts). */
export const wakeAfterCommitStatement = preparedStatement<never>(
  "events_wake_after_commit",
  sql`select set_config('agent.events_wake', 'after_commit', true) as setting`,
).returns({ setting: "text" });

export const wakeStatement = preparedStatement<never>(
  "events_wake",
  sql`select set_config('synchronous_commit', 'off', true) as setting, pg_notify(${EVENTS_CHANNEL}, '')::text as sent`,
).returns({ setting: "text", sent: "text" });

type Waker = { sending: boolean; again: boolean };
const wakers = new WeakMap<Db, Waker>();

/**
 * Notifies the listeners that events were written, after the caller's commit. One notification is
 * out at a time: a call meanwhile sends one more once it is answered, for all the calls before.
 */
export function wakeAfterCommit(pool: Db): void {
  let waker = wakers.get(pool);
  if (!waker) {
    waker = { sending: false, again: false };
    wakers.set(pool, waker);
  }
  if (waker.sending) {
    waker.again = true;
    return;
  }
  send(pool, waker);
}

function send(pool: Db, waker: Waker): void {
  waker.sending = true;
  waker.again = false;
  runPrepared(pool, wakeStatement, {})
    // A failed wake only leaves the listeners to their poll (see above).
    .catch(() => {})
    .finally(() => {
      if (waker.again) send(pool, waker);
      else waker.sending = false;
    });
}
