import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, databaseBehindProxy, type TestDatabase } from "../../testing/database.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { parsePrometheusText } from "../../testing/prometheus.ts";
import type { TcpProxy } from "../../testing/tcp-proxy.ts";
import type { DatabaseHandle } from "../db/client.ts";

// GET {base}/metrics while Postgres is gone: the origin reaches the real database through a TCP
// proxy the test cuts. The series kept in the process (requests, refusals, enclave and chain
// calls) are what an operator reads then; the counts by state, read from the database, cannot be.

const secrets = consoleSecrets();
/** The metrics cache follows this clock: each scrape moves it past the cache. */
const time = { now: Date.parse("2031-05-06T10:00:05Z") };
const clock = { now: () => new Date(time.now) };

describe("GET {base}/metrics when Postgres is gone (real Postgres behind a cut proxy)", () => {
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  let database: DatabaseHandle;
  let origin: TestOrigin;

  const scrape = async (): Promise<{ status: number; seconds: number; text: string }> => {
    time.now += 60_000;
    const started = performance.now();
    const response = await fetch(`${origin.base}/metrics`, {
      headers: { authorization: `Bearer ${secrets.adminToken}` },
      signal: AbortSignal.timeout(15_000),
    }).catch((error: unknown) => {
      throw new Error(`/metrics did not answer within 15 s: ${String(error)}`);
    });
    const text = await response.text();
    return { status: response.status, seconds: (performance.now() - started) / 1000, text };
  };

  beforeAll(async () => {
    testDb = await createTestDatabase();
    ({ proxy, database } = await databaseBehindProxy(testDb.url));
    origin = await startTestOrigin({ database, env: secrets.env, clock, workers: [] });
  });
  afterAll(async () => {
    proxy?.restore();
    await origin?.close();
    await database?.close();
    await proxy?.close();
    await testDb?.drop();
  });

  it("reads the counts by state while the database answers", async () => {
    const { status, text } = await scrape();
    expect(status, text).toBe(200);
    const metrics = parsePrometheusText(text);
    expect(metrics.value("origin_state_counts_read_ok")).toBe(1);
    expect(text).toContain("# TYPE origin_key_pool_keys gauge");
  });

  for (const cut of ["reset", "stall"] as const) {
    it(`still serves the process's own series when the database ${cut === "reset" ? "refuses connections" : "stops answering"}, with the read marked failed`, async () => {
      const before = parsePrometheusText((await scrape()).text);
      const healthz = before.value("origin_http_request_duration_seconds_count", {
        route: "/77/healthz",
        method: "GET",
        status: "200",
      });
      expect((await fetch(`${origin.base}/healthz`)).status).toBe(200);
      if (cut === "reset") proxy.cut("reset");
      else proxy.stall(); // the pool's connections go silent, as behind a partition
      try {
        const { status, seconds, text } = await scrape();
        expect(status, text).toBe(200);
        const metrics = parsePrometheusText(text);
        expect(metrics.value("origin_state_counts_read_ok")).toBe(0);
        expect(
          metrics.value("origin_http_request_duration_seconds_count", {
            route: "/77/healthz",
            method: "GET",
            status: "200",
          }),
        ).toBe((healthz ?? 0) + 1);
        expect(metrics.value("origin_limiter_refusals_total", { tier: "pre_auth_ip" })).toBe(0);
        expect(metrics.samples.some((sample) => sample.name === "origin_key_pool_keys")).toBe(false);
        expect(seconds).toBeLessThan(4);
      } finally {
        proxy.restore();
      }
    }, 30_000);
  }
});
