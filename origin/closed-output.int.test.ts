import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { type OriginProcess, spawnOrigin } from "../testing/origin-process.ts";
import { queryRows } from "./db/client.ts";

// The origin under a supervisor whose log collector goes away (docs/operations.md#logs), or
// `npm run origin | head` once head has exited: its log lines meet a closed pipe (EPIPE). It must
// go on answering, and stop as usual at SIGTERM, drained, its database pool closed; only the
// lines are lost.

describe("the origin process whose log's reader is gone (real process)", () => {
  let db: TestDatabase | undefined;
  afterAll(async () => {
    await db?.drop();
  });

  /** SIGTERM stops it within 8 s (SIGKILL at 15 s), exit 0, no connection of its left open. */
  const expectCleanStop = async (origin: OriginProcess, database: TestDatabase): Promise<void> => {
    const started = Date.now();
    const timer = setTimeout(() => origin.child.kill("SIGKILL"), 15_000);
    const code = await origin.stop();
    clearTimeout(timer);
    expect(code).toBe(0);
    expect(Date.now() - started).toBeLessThan(8_000);
    const [left] = await queryRows<{ n: number }>(
      database.handle.db,
      sql`select count(*)::int as n from pg_stat_activity
          where datname = current_database() and pid <> pg_backend_pid()`,
    );
    expect(left?.n).toBe(0);
  };

  it("answers after its log's reader is gone, and at SIGTERM drains, closes its pool and exits 0", async () => {
    db = await createTestDatabase();
    const origin = await spawnOrigin({ env: { DATABASE_URL: db.url, LOG_LEVEL: "info" } });
    // Nobody reads its output from here on.
    origin.child.stdout?.destroy();
    origin.child.stderr?.destroy();
    for (let i = 0; i < 3; i++) {
      const health = await fetch(`${origin.base}/healthz`);
      expect(health.status).toBe(200);
      await health.body?.cancel();
    }
    const missing = await fetch(`${origin.base}/no-such-route`);
    expect(missing.status).toBe(404);
    await missing.body?.cancel();
    expect(origin.child.exitCode).toBeNull();

    await expectCleanStop(origin, db);
  }, 90_000);

  it("with a reader that stops reading (its pipe full), still stops at SIGTERM: drained, its pool closed, exit 0", async () => {
    const stalled = await createTestDatabase();
    try {
      const origin = await spawnOrigin({ env: { DATABASE_URL: stalled.url, LOG_LEVEL: "info" } });
      // A log collector that stalls without closing: the pipe fills and stays full.
      origin.child.stdout?.pause();
      origin.child.stderr?.pause();
      // Each request logs a line naming its path: some hundreds fill the pipe's 64 KiB.
      for (let i = 0; i < 800; i++) {
        const missing = await fetch(`${origin.base}/no-such-route/${i}/${"x".repeat(200)}`);
        expect(missing.status).toBe(404);
        await missing.body?.cancel();
      }
      await expectCleanStop(origin, stalled);
    } finally {
      await stalled.drop();
    }
  }, 90_000);
});
