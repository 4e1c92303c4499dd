import { randomBytes } from "node:crypto";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consoleCalls, consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { freePort } from "../../testing/free-port.ts";
import { send, type TestResponse } from "../../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { type Exposition, parsePrometheusText } from "../../testing/prometheus.ts";
import { registerAsEdge } from "../../testing/register-as-edge.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { sweepIdentities } from "../identity/sweep.ts";
import { updateRegistrationPolicy } from "../registration/policy-repository.ts";
import { ADMIN_AUTH_FAILURES } from "./admin-auth.ts";

// GET {base}/metrics at the real origin over HTTP (real Postgres): the text parses as Prometheus
// exposition and the figures move when requests, refusals and findings happen.

const EDGE_SECRET = randomBytes(32).toString("hex");
const secrets = consoleSecrets();
/** One clock for both origins: the registration minute and the metrics cache follow it. */
const time = { now: Date.parse("2031-05-06T10:00:05Z") };
const clock = { now: () => new Date(time.now) };

describe("GET {base}/metrics", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let twin: TestOrigin;
  let token: string;
  const env = {
    ...secrets.env,
    AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
    AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
    AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
  };

  const scrape = async (target: TestOrigin = origin): Promise<Exposition> => {
    const response = await send(`${target.base}/metrics`, {
      headers: { authorization: `Bearer ${secrets.adminToken}` },
    });
    expect(response.status).toBe(200);
    return parsePrometheusText(String(response.body));
  };
  const requests = (metrics: Exposition, route: string, status: number): number =>
    metrics.value("origin_http_request_duration_seconds_count", {
      route,
      method: "GET",
      status: String(status),
    }) ?? 0;
  const refusals = (metrics: Exposition, tier: string): number | undefined =>
    metrics.value("origin_limiter_refusals_total", { tier });
  const register = (target: TestOrigin, ip: string): Promise<TestResponse> =>
    registerAsEdge(target.base, EDGE_SECRET, ip);

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 30);
    origin = await startTestOrigin({ database: testDb.handle, env, clock });
    twin = await startTestOrigin({ database: testDb.handle, env, clock });
    const identity = await provisionedIdentity(testDb.handle.db, {
      capabilities: ["read"],
      origin: "operator",
    });
    token = identity.token;
  });
  afterAll(async () => {
    await origin?.close();
    await twin?.close();
    await testDb?.drop();
  });

  it("answers the admin token (header or bearer) with Prometheus text, and nobody else", async () => {
    expect((await send(`${origin.base}/metrics`)).status).toBe(401);
    const wrong = await send(`${origin.base}/metrics`, { headers: { authorization: `Bearer ${token}` } });
    expect(wrong.status).toBe(401);
    const viaHeader = await send(`${origin.base}/metrics`, {
      headers: { "x-admin-api-token": secrets.adminToken },
    });
    expect(viaHeader.status).toBe(200);
    expect(viaHeader.headers["content-type"]).toBe("text/plain; version=0.0.4; charset=utf-8");
    const metrics = parsePrometheusText(String(viaHeader.body));
    expect(Object.fromEntries(metrics.types)).toMatchObject({
      origin_http_request_duration_seconds: "histogram",
      origin_limiter_refusals_total: "counter",
      origin_key_pool_keys: "gauge",
      origin_key_batches: "gauge",
      origin_identity_findings: "gauge",
      origin_agent_actions: "gauge",
      origin_x402_settlements: "gauge",
      origin_enclave_call_duration_seconds: "histogram",
      origin_enclave_call_errors_total: "counter",
      origin_chain_call_duration_seconds: "histogram",
      origin_chain_call_errors_total: "counter",
    });
    expect(metrics.value("origin_key_pool_keys", { state: "free" })).toBe(29);
    expect(metrics.value("origin_key_batches", { state: "available" })).toBe(1);
    for (const tier of [
      "pre_auth_ip",
      "per_agent",
      "registration_early",
      "registration_admission",
      "rpc_in_flight",
      "x402_client",
    ])
      expect(refusals(metrics, tier)).toBe(0);
  });

  it("counts requests by route pattern and status, never by raw path", async () => {
    const before = await scrape();
    const actionId = "0e6c1f0a-3c2b-4f7e-9d8a-1b2c3d4e5f60";
    const bearer = { authorization: `Bearer ${token}` };
    expect((await send(`${origin.base}/agent/v1/network`, { headers: bearer })).status).toBe(200);
    expect((await send(`${origin.base}/agent/v1/network`, { headers: bearer })).status).toBe(200);
    expect((await send(`${origin.base}/agent/v1/actions/${actionId}`, { headers: bearer })).status).toBe(404);
    expect((await send(`${origin.base}/no/such/${actionId}`)).status).toBe(404);
    const after = await scrape();
    expect(requests(after, "/77/agent/v1/network", 200) - requests(before, "/77/agent/v1/network", 200)).toBe(
      2,
    );
    expect(
      requests(after, "/77/agent/v1/actions/:action_id", 404) -
        requests(before, "/77/agent/v1/actions/:action_id", 404),
    ).toBe(1);
    expect(requests(after, "unmatched", 404) - requests(before, "unmatched", 404)).toBe(1);
    expect(
      after.samples.some((sample) => Object.values(sample.labels).some((v) => v.includes(actionId))),
    ).toBe(false);
    // The histogram has its buckets, and +Inf holds every request.
    const labels = { route: "/77/agent/v1/network", method: "GET", status: "200" };
    expect(after.value("origin_http_request_duration_seconds_bucket", { ...labels, le: "+Inf" })).toBe(
      requests(after, "/77/agent/v1/network", 200),
    );
  });

  it("counts refusals by tier: pre-auth per IP, admin auth, the registration's early limiter and admission", async () => {
    // The gateway's pre-auth tier: 60 failures per IP, then 429.
    for (let i = 0; i < 60; i++) {
      const failed = await send(`${origin.base}/agent/v1/network`, {
        headers: { authorization: "Bearer agt_wrong" },
        localAddress: "127.0.0.61",
      });
      expect(failed.status).toBe(401);
    }
    // The 61st failure is refused (a valid token new to the address would still be read, through
    // the allowance past the limit: docs/configuration.md).
    expect(
      (
        await send(`${origin.base}/agent/v1/network`, {
          headers: { authorization: "Bearer agt_wrong" },
          localAddress: "127.0.0.61",
        })
      ).status,
    ).toBe(429);
    // The console's failures.
    const wrongAdmin = consoleCalls(origin.base, { admin: randomBytes(32).toString("hex") });
    for (let i = 0; i <= ADMIN_AUTH_FAILURES.limit; i++)
      await wrongAdmin.get("/registration", { localAddress: "127.0.0.62" });
    // Registration: one attempt per IP group a minute. The second attempt at this node stops at its
    // early limiter; at the twin node, whose limiter has not seen it, at the persisted admission.
    await updateRegistrationPolicy(testDb.handle.db, {
      changes: { paused: false, attemptsPerIpPerMinute: 1 },
      reason: "metrics test",
    });
    expect((await register(origin, "81.4.0.1")).status).toBe(201);
    expect((await register(origin, "81.4.0.1")).status).toBe(429);
    expect((await register(twin, "81.4.0.1")).status).toBe(429);

    const metrics = await scrape();
    expect(refusals(metrics, "pre_auth_ip")).toBe(1);
    expect(refusals(metrics, "admin_auth")).toBe(1);
    expect(refusals(metrics, "registration_early")).toBe(1);
    expect(refusals(metrics, "registration_admission")).toBe(0);
    const twinMetrics = await scrape(twin);
    expect(refusals(twinMetrics, "registration_admission")).toBe(1);
    expect(refusals(twinMetrics, "registration_early")).toBe(0);
  });

  it("reads key stock and findings from the database when scraped, through a short cache", async () => {
    time.now += 6_000; // past the cache of the earlier scrapes
    const before = await scrape();
    expect(before.value("origin_key_pool_keys", { state: "free" })).toBe(28); // one registered since
    expect(before.value("origin_identity_findings", { class: "terminal_unknown" })).toBeUndefined();
    // The real sweep, through the origin's signer: the dormant stub (no enclave configured) answers
    // every proof `agent_signer_protocol_unavailable`, a terminal_unknown finding per identity.
    const report = await sweepIdentities(
      { db: testDb.handle.db, signer: origin.deps.signer, logger: pino({ level: "silent" }) },
      { envId: "local-dev", windowSeconds: 60 },
    );
    expect(report.findings).toBe(2);
    // Within the cache the figures are the last reading: a burst of scrapes reads the database once.
    expect((await scrape()).value("origin_identity_findings", { class: "terminal_unknown" })).toBeUndefined();
    time.now += 6_000;
    const after = await scrape();
    expect(after.value("origin_identity_findings", { class: "terminal_unknown" })).toBe(2);
    // The enclave calls behind them (the sweep asks for the public identity first), timed and
    // counted by class.
    expect(
      after.value("origin_enclave_call_errors_total", { op: "publicIdentity", class: "terminal_unknown" }),
    ).toBe(2);
    expect(
      after.value("origin_enclave_call_duration_seconds_count", {
        op: "publicIdentity",
        outcome: "terminal_unknown",
      }),
    ).toBe(2);
  });

  it("times chain calls and counts their failures", async () => {
    const deadChain = await startTestOrigin({
      database: testDb.handle,
      env: secrets.env,
      rpcUrl: `http://127.0.0.1:${await freePort()}`,
    });
    try {
      // /balance asks for the balance and the block in one JSON-RPC batch.
      const balance = await send(`${deadChain.base}/agent/v1/balance`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(balance.status).toBeGreaterThanOrEqual(500);
      const metrics = await scrape(deadChain);
      expect(
        metrics.value("origin_chain_call_errors_total", { method: "batch", failure: "unreachable" }),
      ).toBe(1);
      expect(
        metrics.value("origin_chain_call_duration_seconds_count", {
          method: "batch",
          outcome: "unreachable",
        }),
      ).toBe(1);
    } finally {
      await deadChain.close();
    }
  });

  it("counts a registration refused by the early limiter before the policy is read under its reason (the console's chart takes the same count)", async () => {
    await updateRegistrationPolicy(testDb.handle.db, {
      changes: { paused: false, attemptsPerIpPerMinute: 1 },
      reason: "metrics test",
    });
    const earlyRefusals = async (): Promise<number> =>
      (await scrape()).value("origin_registration_refusals_total", { reason: "early_limiter" }) ?? 0;
    const before = await earlyRefusals();
    expect((await register(origin, "81.4.0.2")).status).toBe(201);
    // Within the second the limits were read: refused from the node's memory, the flood's path.
    expect((await register(origin, "81.4.0.2")).status).toBe(429);
    expect(await earlyRefusals()).toBe(before + 1);
  });
});
