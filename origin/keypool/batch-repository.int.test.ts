/**
 * A batch's steps each move it only from the state they expect: a batch the sweeper failed meanwhile
 * stores no key and frees none, and the step says so (the refill then leaves it as found).
 */
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { randomGeneratedKeys } from "../../testing/generated-keys.ts";
import { queryRows } from "../db/client.ts";
import {
  advanceBatch,
  createBatch,
  failBatch,
  recordGeneratedKeys,
  releaseBatch,
} from "./batch-repository.ts";

describe("a key batch's steps", () => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  const keysOf = (batchId: string) =>
    queryRows<{ status: string; count: number }>(
      testDb.handle.db,
      sql`select status, count(*)::int as count from key_pool where batch_id = ${batchId} group by status`,
    );
  const statusOf = async (batchId: string) =>
    (
      await queryRows<{ status: string }>(
        testDb.handle.db,
        sql`select status from key_batches where batch_id = ${batchId}`,
      )
    )[0]?.status;

  it("records the generated keys as pending, then frees them all on release", async () => {
    const db = testDb.handle.db;
    const batch = await createBatch(db, 3);
    expect(await recordGeneratedKeys(db, batch, randomGeneratedKeys(3))).toBe(true);
    expect(await statusOf(batch)).toBe("generated");
    expect(await keysOf(batch)).toEqual([{ status: "pending", count: 3 }]);
    expect(await advanceBatch(db, batch, "generated", "backup_written")).toBe(true);
    expect(await advanceBatch(db, batch, "backup_written", "backup_verified")).toBe(true);
    expect(await releaseBatch(db, batch)).toBe(true);
    expect(await statusOf(batch)).toBe("available");
    expect(await keysOf(batch)).toEqual([{ status: "free", count: 3 }]);
  });

  it("frees only the pending keys of the batch it releases: a key set apart before the release stays so", async () => {
    const db = testDb.handle.db;
    const batch = await createBatch(db, 3);
    const keys = randomGeneratedKeys(3);
    expect(await recordGeneratedKeys(db, batch, keys)).toBe(true);
    expect(await advanceBatch(db, batch, "generated", "backup_written")).toBe(true);
    expect(await advanceBatch(db, batch, "backup_written", "backup_verified")).toBe(true);
    // Written by hand (no step quarantines one key of a batch it goes on with): the guard under
    // test is release's `status = 'pending'`, and "a key never returns to free" (schema/keypool.ts).
    await db.execute(sql`update key_pool set status = 'quarantined' where key_ref = ${keys[0]!.keyRef}`);
    expect(await releaseBatch(db, batch)).toBe(true);
    // Mutation: without `status = 'pending'` the quarantined key is freed with the others.
    expect(await keysOf(batch)).toEqual(
      expect.arrayContaining([
        { status: "free", count: 2 },
        { status: "quarantined", count: 1 },
      ]),
    );
    expect(await keysOf(batch)).toHaveLength(2);
  });

  it("stores no key for a batch failed before its keys are recorded, and says so", async () => {
    const db = testDb.handle.db;
    const batch = await createBatch(db, 2);
    expect(await failBatch(db, batch, "swept")).toBe(true);
    expect(await recordGeneratedKeys(db, batch, randomGeneratedKeys(2))).toBe(false);
    expect(await keysOf(batch)).toEqual([]);
    expect(await statusOf(batch)).toBe("failed");
  });

  it("frees no key of a batch whose backup is not verified, and says so", async () => {
    const db = testDb.handle.db;
    const batch = await createBatch(db, 2);
    expect(await recordGeneratedKeys(db, batch, randomGeneratedKeys(2))).toBe(true);
    expect(await advanceBatch(db, batch, "generated", "backup_written")).toBe(true);
    expect(await releaseBatch(db, batch)).toBe(false);
    expect(await keysOf(batch)).toEqual([{ status: "pending", count: 2 }]);
    expect(await statusOf(batch)).toBe("backup_written");
  });

  it("frees no key of a batch failed before its release, and says so: its keys stay quarantined", async () => {
    const db = testDb.handle.db;
    const batch = await createBatch(db, 2);
    expect(await recordGeneratedKeys(db, batch, randomGeneratedKeys(2))).toBe(true);
    expect(await advanceBatch(db, batch, "generated", "backup_written")).toBe(true);
    expect(await advanceBatch(db, batch, "backup_written", "backup_verified")).toBe(true);
    expect(await failBatch(db, batch, "swept")).toBe(true);
    expect(await releaseBatch(db, batch)).toBe(false);
    expect(await keysOf(batch)).toEqual([{ status: "quarantined", count: 2 }]);
    expect(await statusOf(batch)).toBe("failed");
  });
});
