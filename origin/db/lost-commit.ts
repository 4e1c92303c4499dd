/**
 * A transaction whose link to the database is lost while its COMMIT is in flight may have
 * committed with only its answer lost. Where the answer holds a secret shown once (a token: only
 * its hash is stored), an error then leaves what was made with a secret nobody was ever shown: an
 * identity and its key taken, or an identity whose old token is gone. So such a transaction looks,
 * once it has ended, whether its writes are there, and gives its answer when they are.
 */
import { type SQL, sql } from "drizzle-orm";
import { sleep } from "../../shared/sleep.ts";
import { type Db, queryRows } from "./client.ts";
import { isDatabaseUnavailable } from "./unavailable.ts";

/** How to learn whether a transaction whose commit's answer was lost committed. */
export type CommitLook = {
  /**
   * A statement taking a lock the transaction held from before its writes until its end (a row it
   * locked or wrote), so it returns only once the transaction has ended, however it ended.
   */
  awaitEnd: SQL;
  /** A query that answers a row when the transaction's writes are there, and none when not. */
  made: SQL;
};

/**
 * Whether the transaction committed could not be learnt: the database stayed out of reach, or its
 * session held its locks past the look's bound. What it made may be there or not. Caused by the
 * lost link's error, so it counts as the database being unavailable (isDatabaseUnavailable).
 */
export class CommitOutcomeUnknown extends Error {
  override readonly name = "CommitOutcomeUnknown";
  constructor(cause: unknown) {
    super("the database link was lost while the change committed, and whether it did could not be learnt", {
      cause,
    });
  }
}

/** Marks the body's writes done: `answer` is what a commit without an answer made, found by `look`. */
export type Committing<T> = (answer: T, look: CommitLook) => T;

/**
 * `body` in one transaction. Once its writes are made, the body hands `committing` its answer and
 * how to look for them. When the link is lost after that, the answer is given if the look finds
 * them committed; the link's error is thrown if they were not (nothing was made, a retry is
 * safe); CommitOutcomeUnknown if the look cannot tell.
 */
export async function transactionAnsweringLostCommit<T>(
  db: Db,
  body: (tx: Db, committing: Committing<T>) => Promise<T>,
): Promise<T> {
  let pending: { answer: T; look: CommitLook } | undefined;
  try {
    return await db.transaction((tx) =>
      body(tx, (answer, look) => {
        pending = { answer, look };
        return answer;
      }),
    );
  } catch (error) {
    if (pending === undefined || !isDatabaseUnavailable(error)) throw error;
    if (await committed(db, pending.look, error)) return pending.answer;
    throw error;
  }
}

/** Pauses before the tries of the look: a link that came back at once, or soon. */
const LOOK_PAUSES_MS = [0, 250, 1_000];
/**
 * The longest the look waits for the transaction to end, and the time after which it is not tried
 * again: a commit in flight ends within milliseconds; one that has not ended by then is held by a
 * session nobody can reach, and the answer stays unknown.
 */
const LOOK_MS = 5_000;

/** Whether the transaction committed, once it has ended; CommitOutcomeUnknown when that cannot be learnt. */
async function committed(db: Db, look: CommitLook, linkLost: unknown): Promise<boolean> {
  const deadline = performance.now() + LOOK_MS;
  for (let attempt = 0; ; attempt++) {
    await sleep(LOOK_PAUSES_MS[attempt]!);
    try {
      return await db.transaction(async (tx) => {
        await tx.execute(sql.raw(`set local lock_timeout = ${LOOK_MS}`));
        await tx.execute(look.awaitEnd);
        return (await queryRows(tx, look.made)).length > 0;
      });
    } catch (error) {
      const again = attempt + 1 < LOOK_PAUSES_MS.length && performance.now() < deadline;
      if (!again || !isDatabaseUnavailable(error)) throw new CommitOutcomeUnknown(linkLost);
    }
  }
}
