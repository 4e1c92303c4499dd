import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, databaseBehindProxy, type TestDatabase } from "../../testing/database.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { parsePrometheusText } from "../../testing/prometheus.ts";
import type { TcpProxy } from "../../testing/tcp-proxy.ts";
import type { DatabaseHandle } from "../db/client.ts";

// origin_worker_ticks_total as an operator reads it from GET {base}/metrics: a worker's loop counts
// its ticks, ok while its database answers, failed while it is gone (the real database behind a
// proxy the test cuts), ok again once it is back.

const secrets = consoleSecrets();

describe("origin_worker_ticks_total (the identity sweep every second, its database behind a cut proxy)", () => {
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  let database: DatabaseHandle;
  let origin: TestOrigin;

  const ticks = async (outcome: "ok" | "failed"): Promise<number> => {
    const response = await fetch(`${origin.base}/metrics`, {
      headers: { authorization: `Bearer ${secrets.adminToken}` },
    });
    const text = await response.text();
    expect(response.status, text).toBe(200);
    return (
      parsePrometheusText(text).value("origin_worker_ticks_total", { worker: "identity-sweep", outcome }) ??
      -1
    );
  };

  beforeAll(async () => {
    testDb = await createTestDatabase();
    ({ proxy, database } = await databaseBehindProxy(testDb.url, { statementWaitMs: 1_000 }));
    origin = await startTestOrigin({
      database,
      env: { ...secrets.env, IDENTITY_SWEEP_PERIOD_SECONDS: "1" },
      workers: ["identity"],
    });
  });
  afterAll(async () => {
    proxy?.restore();
    await origin?.close();
    await database?.close();
    await proxy?.close();
    await testDb?.drop();
  });

  it("counts a worker's ticks by outcome: ok while its database answers, failed while it is gone, ok again after", async () => {
    await expect.poll(() => ticks("ok")).toBeGreaterThanOrEqual(2);
    expect(await ticks("failed")).toBe(0);

    proxy.cut("reset");
    try {
      await expect.poll(() => ticks("failed")).toBeGreaterThanOrEqual(2);
    } finally {
      proxy.restore();
    }
    const okBefore = await ticks("ok");
    await expect.poll(() => ticks("ok")).toBeGreaterThanOrEqual(okBefore + 2);
  });

  it("names only the workers the origin started", async () => {
    const response = await fetch(`${origin.base}/metrics`, {
      headers: { authorization: `Bearer ${secrets.adminToken}` },
    });
    const workers = new Set(
      parsePrometheusText(await response.text())
        .samples.filter((sample) => sample.name === "origin_worker_ticks_total")
        .map((sample) => sample.labels.worker),
    );
    expect([...workers]).toEqual(["identity-sweep"]);
  });
});
