import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, databaseBehindProxy, type TestDatabase } from "../testing/database.ts";
import { startTestOrigin, type TestOrigin } from "../testing/origin.ts";
import type { TcpProxy } from "../testing/tcp-proxy.ts";
import type { DatabaseHandle } from "./db/client.ts";
import { HEALTH_DATABASE_TIMEOUT_MS } from "./health.ts";

// /healthz while Postgres stops answering: the origin reaches the real database through a TCP
// proxy the test turns into a partition (open connections go silent, new ones are never answered).
// A load balancer asks /healthz to learn the database is gone; it must be told, not kept waiting.

describe("GET /healthz when Postgres stops answering (real Postgres behind a partition)", () => {
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  let database: DatabaseHandle;
  let origin: TestOrigin;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    ({ proxy, database } = await databaseBehindProxy(testDb.url));
    origin = await startTestOrigin({ database, workers: [] });
  });
  afterAll(async () => {
    proxy?.restore();
    await origin?.close();
    await database?.close();
    await proxy?.close();
    await testDb?.drop();
  });

  it("answers 503 down within its bound, instead of hanging until the TCP connection dies", async () => {
    const healthy = await fetch(`${origin.base}/healthz`);
    expect(healthy.status).toBe(200);
    expect(await healthy.json()).toMatchObject({ database: { ok: true } });

    proxy.stall();
    proxy.cut("blackhole");
    const started = performance.now();
    const response = await fetch(`${origin.base}/healthz`, { signal: AbortSignal.timeout(15_000) }).catch(
      (error: unknown) => {
        throw new Error(`/healthz did not answer within 15 s: ${String(error)}`);
      },
    );
    const seconds = (performance.now() - started) / 1000;
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({
      status: "down",
      database: { driver: "pg", ok: false, error: "timeout" },
    });
    expect(seconds).toBeLessThan(HEALTH_DATABASE_TIMEOUT_MS / 1000 + 1.5);
  }, 30_000);
});
