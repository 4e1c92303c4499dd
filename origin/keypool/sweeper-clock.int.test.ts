import { sql } from "drizzle-orm";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import type { Clock } from "../clock.ts";
import { queryRows } from "../db/client.ts";
import { createBatch } from "./batch-repository.ts";

// The stuck-batch sweeper (docs/operations.md#the-key-pool-refills-on-demand) against a real
// database and a real origin whose clock is off the database host's by five minutes, as an
// operator's hosts may be: the batches' steps are stamped by the database, so their age is the
// database's to say. The origin's clock is the test's (an injected clock, the one thing faked).

const SKEW_MS = 5 * 60_000;
const STUCK_SECONDS = 300;

describe("the key-batch sweeper under a clock skew between the origin and the database", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin | undefined;
  const db = () => testDb.handle.db;

  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterEach(async () => {
    await origin?.close();
    origin = undefined;
    await db().execute(sql`truncate key_pool, key_batches cascade`);
  });

  /** A batch in `generated` with four pending keys, its last step `secondsAgo` by the database's clock. */
  const batchSteppedAgo = async (secondsAgo: number): Promise<string> => {
    const id = await createBatch(db(), 4);
    await db().execute(
      sql`update key_batches set status = 'generated',
            status_changed_at = now() - make_interval(secs => ${secondsAgo}) where batch_id = ${id}`,
    );
    await db().execute(
      sql`insert into key_pool (key_ref, batch_id, address, public_key, status)
          select h, ${id}::uuid, '0x' || left(h, 40), '0x04', 'pending'
          from generate_series(1, 4) as n, encode(sha256((${id}::text || n)::bytea), 'hex') as h`,
    );
    return id;
  };
  const statusOf = async (id: string): Promise<{ status: string; keys: string[] }> => {
    const [batch] = await queryRows<{ status: string }>(
      db(),
      sql`select status from key_batches where batch_id = ${id}`,
    );
    const keys = await queryRows<{ status: string }>(
      db(),
      sql`select distinct status from key_pool where batch_id = ${id}`,
    );
    return { status: batch!.status, keys: keys.map((key) => key.status) };
  };
  const startSkewed = async (skewMs: number): Promise<void> => {
    const clock: Clock = { now: () => new Date(Date.now() + skewMs) };
    // The sweeper alone: without an enclave the refill is off; its first tick runs at start.
    origin = await startTestOrigin({
      database: testDb.handle,
      clock,
      workers: ["keypool"],
      env: { KEY_BATCH_STUCK_SECONDS: String(STUCK_SECONDS) },
    });
  };
  const untilFailed = async (id: string): Promise<void> => {
    const deadline = Date.now() + 10_000;
    while ((await statusOf(id)).status !== "failed" && Date.now() < deadline) await sleep(100);
  };

  it("an origin whose clock is five minutes ahead fails the batch stuck past KEY_BATCH_STUCK_SECONDS, not the one that stepped a moment ago", async () => {
    const fresh = await batchSteppedAgo(1);
    const stuck = await batchSteppedAgo(STUCK_SECONDS + 60);
    await startSkewed(SKEW_MS);
    // The stuck batch's end shows the sweeper's tick has run.
    await untilFailed(stuck);
    expect(await statusOf(stuck)).toEqual({ status: "failed", keys: ["quarantined"] });
    // Read against the origin's clock, the fresh batch looked five minutes old: failed mid-step,
    // its keys quarantined for good while the refill was still making them.
    expect(await statusOf(fresh)).toEqual({ status: "generated", keys: ["pending"] });
  });

  it("an origin whose clock is five minutes behind still fails a batch stuck past KEY_BATCH_STUCK_SECONDS", async () => {
    const stuck = await batchSteppedAgo(STUCK_SECONDS + 60);
    await startSkewed(-SKEW_MS);
    await untilFailed(stuck);
    // Read against the origin's clock, the batch looked a minute old and stayed five minutes more.
    expect(await statusOf(stuck)).toEqual({ status: "failed", keys: ["quarantined"] });
  });
});
