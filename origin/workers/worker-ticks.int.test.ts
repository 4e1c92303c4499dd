import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, type ExpectStatic, it } from "vitest";
import { consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, databaseBehindProxy, type TestDatabase } from "../../testing/database.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { parsePrometheusText } from "../../testing/prometheus.ts";
import { useMoneyStack, useStackOrigin } from "../../testing/stack.ts";
import type { TcpProxy } from "../../testing/tcp-proxy.ts";
import type { CapabilityName } from "../capability.ts";
import type { DatabaseHandle } from "../db/client.ts";
import { ensureWebhookSigningKeyFile } from "../webhooks/signing.ts";

// origin_worker_ticks_total as an operator reads it from GET {base}/metrics: a worker's loop counts
// its ticks, ok while its database answers, failed while it is gone (the real database behind a
// proxy the test cuts), ok again once it is back.

const secrets = consoleSecrets();

// The two blocks run beside each other, their tests each in turn: each has its own database, origin
// and processes (the first its own database behind its own proxy, the second a money stack of its
// own), and each reads only its own origin's metrics; the cut is of the first block's proxy only.
describe("origin_worker_ticks_total (the identity sweep every second, its database behind a cut proxy)", {
  concurrent: true,
}, () => {
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  let database: DatabaseHandle;
  let origin: TestOrigin;

  const ticks = async (expect: ExpectStatic, outcome: "ok" | "failed"): Promise<number> => {
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

  it.sequential("counts a worker's ticks by outcome: ok while its database answers, failed while it is gone, ok again after", async ({
    expect,
  }) => {
    await expect.poll(() => ticks(expect, "ok")).toBeGreaterThanOrEqual(2);
    expect(await ticks(expect, "failed")).toBe(0);

    proxy.cut("reset");
    try {
      await expect.poll(() => ticks(expect, "failed")).toBeGreaterThanOrEqual(2);
    } finally {
      proxy.restore();
    }
    const okBefore = await ticks(expect, "ok");
    await expect.poll(() => ticks(expect, "ok")).toBeGreaterThanOrEqual(okBefore + 2);
  });

  it.sequential("names only the workers the origin started", async ({ expect }) => {
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

// Every loop docs/operations.md names under origin_worker_ticks_total, on an origin running every
// capability's workers as a node runs them (the real enclave, devnet and database). The key-pool
// refill and the webhooks' fan-out and delivery were missing: the capabilities wrapped their loops
// (to add to their stop) and the wrappers did not pass the ticks on.
describe("origin_worker_ticks_total on an origin running every worker", { concurrent: true }, () => {
  const EVERY_CAPABILITY: readonly CapabilityName[] = [
    "health",
    "console",
    "money",
    "registration",
    "openapi",
    "gateway",
    "x402",
    "keypool",
    "identity",
    "events",
    "webhooks",
  ];
  const EVERY_LOOP = [
    "approved-transfers",
    "events_retention",
    "identity-sweep",
    "key-batch-sweeper",
    "key-pool-refill",
    "operator_sessions_retention",
    "state-counts-fold",
    "tx-tracker",
    "webhooks_delivery",
    "webhooks_fan_out",
    "webhooks_retention",
  ];
  const stack = useMoneyStack();
  let keyDir = "";
  beforeAll(async () => {
    keyDir = await mkdtemp(path.join(tmpdir(), "worker-ticks-"));
    await ensureWebhookSigningKeyFile(path.join(keyDir, "webhook.key"));
  });
  afterAll(async () => {
    if (keyDir) await rm(keyDir, { recursive: true, force: true });
  });
  const origin = useStackOrigin("origin with every worker", stack, () => ({
    workers: EVERY_CAPABILITY,
    env: { ...secrets.env, AGENT_WEBHOOKS_SIGNING_KEY_FILE: path.join(keyDir, "webhook.key") },
  }));

  it.sequential("counts the ticks of every loop the operations guide names, each ending its first", async ({
    expect,
  }) => {
    const ended = async (): Promise<Record<string, number>> => {
      const response = await fetch(`${origin.base}/metrics`, {
        headers: { authorization: `Bearer ${secrets.adminToken}` },
      });
      const text = await response.text();
      expect(response.status, text).toBe(200);
      const byWorker: Record<string, number> = {};
      for (const sample of parsePrometheusText(text).samples) {
        if (sample.name !== "origin_worker_ticks_total") continue;
        const worker = sample.labels.worker!;
        byWorker[worker] = (byWorker[worker] ?? 0) + sample.value;
      }
      return byWorker;
    };
    expect(Object.keys(await ended()).sort()).toEqual(EVERY_LOOP);
    // Each loop runs its first tick as it starts: one that ends none is stuck at its first.
    await expect
      .poll(async () => Object.values(await ended()).every((ticks) => ticks >= 1), { timeout: 30_000 })
      .toBe(true);
  });

  // A sweep (sending stuck transactions again, ending expired holds) runs on one tick in several:
  // a tracker whose ticks go on but whose sweeps never come round is seen in its own series.
  it.sequential("counts the tracker's sweeps apart from its ticks (origin_worker_sweeps_total), fewer than its ticks and growing", async ({
    expect,
  }) => {
    const read = async (): Promise<{ ticks: number; sweeps: number }> => {
      const response = await fetch(`${origin.base}/metrics`, {
        headers: { authorization: `Bearer ${secrets.adminToken}` },
      });
      const metrics = parsePrometheusText(await response.text());
      const labels = { worker: "tx-tracker", outcome: "ok" };
      return {
        ticks: metrics.value("origin_worker_ticks_total", labels) ?? 0,
        sweeps: metrics.value("origin_worker_sweeps_total", labels) ?? Number.NaN,
      };
    };
    const first = await read();
    expect(first.sweeps).not.toBeNaN();
    await expect
      .poll(async () => (await read()).sweeps, { timeout: 30_000 })
      .toBeGreaterThanOrEqual(first.sweeps + 2);
    const later = await read();
    expect(later.sweeps).toBeLessThan(later.ticks);
  });
});
