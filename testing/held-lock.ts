/**
 * A lock a test holds in a transaction of its own, so that the service's statements needing it wait
 * there until the test lets it go: how tests put concurrent work in a chosen order with the real
 * database. The transaction writes nothing.
 */
import type { SQL } from "drizzle-orm";
import type { Db } from "../origin/db/client.ts";

export type HeldLock = { release(): Promise<void> };

/** Runs `lock` (a locking statement) and holds what it took until `release`. */
export async function holdLock(db: Db, lock: SQL): Promise<HeldLock> {
  let letGo!: () => void;
  const released = new Promise<void>((resolve) => {
    letGo = resolve;
  });
  let locked!: () => void;
  const taken = new Promise<void>((resolve) => {
    locked = resolve;
  });
  const holder = db.transaction(async (tx) => {
    await tx.execute(lock);
    locked();
    await released;
  });
  // A lock statement that fails ends the holder before it is taken.
  await Promise.race([taken, holder]);
  return {
    async release() {
      letGo();
      await holder;
    },
  };
}
