/**
 * A lock a test holds in a transaction of its own, so that the service's statements needing it wait
 * there until the test lets it go: how tests put concurrent work in a chosen order with the real
 * database. The transaction writes nothing.
 */
import type { SQL } from "drizzle-orm";
import { onTestFinished } from "vitest";
import type { Db } from "../origin/db/client.ts";
import { backendPid } from "./lock-waiters.ts";

export type HeldLock = {
  /** The holding session's backend pid: what the statements waiting on the lock are blocked by. */
  pid: number;
  release(): Promise<void>;
};

/**
 * Runs `lock` (a locking statement) and holds what it took until `release`, or until the test that
 * took it ends, whichever is first: a test that fails between the two (a wait that never ends, an
 * expectation) would otherwise leave the transaction open, its connection out of the pool, and the
 * file's shutdown waiting on it until the hook timeout. Called inside a test only; a test that runs
 * beside others passes its context's `onTestFinished` (the global one attaches the release to
 * whichever test vitest calls current, which may be one beside it that ends sooner).
 */
export async function holdLock(
  db: Db,
  lock: SQL,
  test: { onTestFinished: typeof onTestFinished } = { onTestFinished },
): Promise<HeldLock> {
  let letGo!: () => void;
  const released = new Promise<void>((resolve) => {
    letGo = resolve;
  });
  let locked!: (pid: number) => void;
  const taken = new Promise<number>((resolve) => {
    locked = resolve;
  });
  const holder = db.transaction(async (tx) => {
    const pid = await backendPid(tx);
    await tx.execute(lock);
    locked(pid);
    await released;
  });
  const release = async (): Promise<void> => {
    letGo();
    await holder;
  };
  // A lock statement that failed has failed holdLock itself: nothing more to say here.
  test.onTestFinished(() => release().catch(() => {}));
  // A lock statement that fails ends the holder before it is taken.
  const pid = await Promise.race([taken, holder.then(() => 0)]);
  return { pid, release };
}
