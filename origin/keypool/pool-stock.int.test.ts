/**
 * poolStock reads the free keys' partial index and the in-progress batches' sizes, not key_pool
 * as a whole: these tests hold it to what the pool holds at every step of a batch's life.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { randomGeneratedKeys } from "../../testing/generated-keys.ts";
import {
  advanceBatch,
  createBatch,
  failBatch,
  poolStock,
  recordGeneratedKeys,
  releaseBatch,
} from "./batch-repository.ts";
import { provisionIdentity } from "./provision.ts";

describe("poolStock", () => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  it("counts free keys, and every key of a batch on its way, at each step; none of an assigned, failed or quarantined one", async () => {
    const db = testDb.handle.db;
    const stock = () => poolStock(db);
    expect(await stock()).toEqual({ free: 0, pendingInBatches: 0 });

    // One batch made all the way, then one key of it assigned to an agent.
    const made = await createBatch(db, 3);
    expect(await stock()).toEqual({ free: 0, pendingInBatches: 3 });
    expect(await recordGeneratedKeys(db, made, randomGeneratedKeys(3))).toBe(true);
    expect(await stock()).toEqual({ free: 0, pendingInBatches: 3 });
    expect(await advanceBatch(db, made, "generated", "backup_written")).toBe(true);
    expect(await advanceBatch(db, made, "backup_written", "backup_verified")).toBe(true);
    expect(await stock()).toEqual({ free: 0, pendingInBatches: 3 });
    expect(await releaseBatch(db, made)).toBe(true);
    expect(await stock()).toEqual({ free: 3, pendingInBatches: 0 });
    const assigned = await provisionIdentity(db, { capabilities: ["read"], origin: "operator" });
    expect(assigned.ok).toBe(true);
    expect(await stock()).toEqual({ free: 2, pendingInBatches: 0 });

    // One batch failed after its keys were recorded (quarantined), one still requested, one generated.
    const failed = await createBatch(db, 4);
    expect(await recordGeneratedKeys(db, failed, randomGeneratedKeys(4))).toBe(true);
    const requested = await createBatch(db, 5);
    const generated = await createBatch(db, 6);
    expect(await recordGeneratedKeys(db, generated, randomGeneratedKeys(6))).toBe(true);
    expect(await stock()).toEqual({ free: 2, pendingInBatches: 4 + 5 + 6 });
    expect(await failBatch(db, failed, "test")).toBe(true);
    expect(await stock()).toEqual({ free: 2, pendingInBatches: 5 + 6 });
    expect(await failBatch(db, requested, "test")).toBe(true);
    expect(await stock()).toEqual({ free: 2, pendingInBatches: 6 });
  });
});
