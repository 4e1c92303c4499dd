import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { LOG_QUEUE_MAX_BYTES } from "../shared/node/unread-output.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { type OriginProcess, spawnOrigin } from "../testing/origin-process.ts";
import { queryRows } from "./db/client.ts";

// The origin under a supervisor whose log collector goes away (docs/operations.md#logs), or
// `npm run origin | head` once head has exited: its log lines meet a closed pipe (EPIPE). It must
// go on answering, and stop as usual at SIGTERM, drained, its database pool closed; only the
// lines are lost.

// The three run beside each other: each has its own database and its own origin process, and
// counts only its own database's connections.
describe("the origin process whose log's reader is gone (real process)", { concurrent: true }, () => {
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

  // pino's destination queued every line its stalled reader did not take, in the origin's memory,
  // for as long as the stall lasted: each request's line, forever. It now holds at most
  // LOG_QUEUE_MAX_BYTES and drops what comes past it, so a reader back from its stall gets that
  // much of a backlog (and what its pipe held), never the whole stall's worth.
  it("with a reader that stalls, holds at most a bounded backlog of its lines for it (the rest dropped), answers all the while, and stops at SIGTERM", async () => {
    const stalled = await createTestDatabase();
    try {
      const origin = await spawnOrigin({ env: { DATABASE_URL: stalled.url, LOG_LEVEL: "info" } });
      let received = "";
      origin.child.stdout?.on("data", (chunk: Buffer) => {
        received += chunk.toString();
      });
      origin.child.stdout?.pause();
      // About 160 bytes of log a request: 20,000 write 3 MB while the reader stalls, far past the
      // bound and what the socket and the test's paused stream take.
      const requests = 20_000;
      let next = 0;
      const client = async (): Promise<void> => {
        while (next < requests) {
          next++;
          const missing = await fetch(`${origin.base}/no-such-route`);
          expect(missing.status).toBe(404);
          await missing.body?.cancel();
        }
      };
      await Promise.all(Array.from({ length: 8 }, client));
      // The collector reads again; the origin then stops, its last lines getting through.
      origin.child.stdout?.resume();
      await expectCleanStop(origin, stalled);
      const requestLines = received.split("\n").filter((line) => line.includes('"msg":"request"'));
      const backlogBytes = requestLines.reduce((sum, line) => sum + line.length + 1, 0);
      // The bound, and what the socket and the test's paused stream held (some 100 KiB).
      expect(backlogBytes).toBeLessThan(LOG_QUEUE_MAX_BYTES + 512 * 1024);
      // Once caught up it says how many it dropped: with those delivered, every request's line.
      const dropped = received
        .split("\n")
        .filter((line) => line.includes('"msg":"log lines dropped"'))
        .reduce((sum, line) => sum + (JSON.parse(line) as { dropped_lines: number }).dropped_lines, 0);
      expect(requestLines.length + dropped).toBeGreaterThanOrEqual(requests);
      expect(received).toContain('"msg":"stopped"');
    } finally {
      await stalled.drop();
    }
  }, 180_000);
});
