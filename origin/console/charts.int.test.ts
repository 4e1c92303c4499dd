import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type NodeCharts, nodeChartsSchema } from "../../shared/console-charts-schema.ts";
import { HEADER_EDGE_SECRET, HEADER_REGISTRATION, HEADER_REGISTRATION_IP } from "../../shared/constants.ts";
import { chartBuckets, seedChartRows } from "../../testing/console-charts-seed.ts";
import { consoleCalls, consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { send } from "../../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { seedFreeKeys } from "../../testing/seed.ts";

// GET {base}/admin/agents/overview/charts at the real origin (real Postgres), on a fixed clock:
// rows seeded at known times inside and just outside each window come back in the buckets they
// belong to, the percentiles are those of the seeded durations, and registrations refused by the
// real registration route are counted by reason in their hour.

const EDGE_SECRET = randomBytes(32).toString("hex");
const secrets = consoleSecrets();
const NOW = new Date("2031-05-06T10:30:20.000Z");
const iso = (ms: number): string => new Date(ms).toISOString();

describe("GET {base}/admin/agents/overview/charts", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let charts: NodeCharts;
  const { minute, hour } = chartBuckets(NOW);

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 12);
    await seedChartRows(testDb.handle.db, NOW);
    origin = await startTestOrigin({
      database: testDb.handle,
      clock: { now: () => new Date(NOW) },
      env: {
        ...secrets.env,
        AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
        AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
        AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
        AGENT_TREASURY_FLOOR: "5000000",
      },
    });
    // Refused registrations, through the real route: the policy starts paused (twice), a request
    // without the edge secret, and a body that is not {}.
    const register = (headers: Record<string, string>, body = "{}") =>
      send(`${origin.base}/agent/v1/register`, {
        method: "POST",
        headers: { [HEADER_REGISTRATION]: "1", [HEADER_REGISTRATION_IP]: "81.4.0.9", ...headers },
        body,
      });
    expect((await register({ [HEADER_EDGE_SECRET]: EDGE_SECRET })).status).toBe(503);
    expect((await register({ [HEADER_EDGE_SECRET]: EDGE_SECRET })).status).toBe(503);
    expect((await register({})).status).toBe(403);
    expect((await register({ [HEADER_EDGE_SECRET]: EDGE_SECRET }, '{"a":1}')).status).toBe(400);

    const response = await consoleCalls(origin.base, { admin: secrets.adminToken }).get("/overview/charts");
    expect(response.status).toBe(200);
    charts = nodeChartsSchema.parse(response.body);
  });
  afterAll(async () => {
    await origin?.close();
    await testDb?.drop();
  });

  it("answers the admin read token only, never cached, and is in the console's OpenAPI document", async () => {
    expect((await consoleCalls(origin.base, {}).get("/overview/charts")).status).toBe(401);
    const response = await consoleCalls(origin.base, { admin: secrets.adminToken }).get("/overview/charts");
    expect(response.headers["cache-control"]).toBe("no-store");
    const document = await send(`${origin.base}/admin/openapi.json`);
    expect(Object.keys((document.body as { paths: object }).paths)).toContain(
      "/admin/agents/overview/charts",
    );
  });

  it("counts registrations issued, admitted and refused by reason per UTC hour, the last 24", () => {
    const { registrations } = charts;
    expect(registrations.buckets).toHaveLength(24);
    expect(registrations.from).toBe(iso(hour - 23 * 3_600_000));
    expect(registrations.to).toBe(iso(hour + 3_600_000));
    expect(registrations.buckets.map((bucket) => bucket.start)).toEqual(
      Array.from({ length: 24 }, (_, i) => iso(hour - (23 - i) * 3_600_000)),
    );
    const nonEmpty = registrations.buckets.filter(
      (bucket) => bucket.issued + bucket.admitted_attempts > 0 || Object.keys(bucket.refused).length > 0,
    );
    expect(nonEmpty).toEqual([
      { start: iso(hour - 3_600_000), issued: 2, admitted_attempts: 4, refused: {} },
      { start: iso(hour), issued: 1, admitted_attempts: 2, refused: { paused: 2, ingress: 1, malformed: 1 } },
    ]);
    expect(registrations.refusals_since).toBe(NOW.toISOString());
  });

  it("counts actions created per UTC minute, the last 60, by kind and state now", () => {
    const { actions } = charts;
    expect(actions.buckets).toHaveLength(60);
    expect(actions.from).toBe(iso(minute - 59 * 60_000));
    expect(actions.to).toBe(iso(minute + 60_000));
    expect(actions.buckets.filter((bucket) => bucket.counts.length > 0)).toEqual([
      { start: iso(minute - 10 * 60_000), counts: [{ kind: "transfer", state: "confirmed", count: 5 }] },
      { start: iso(minute - 2 * 60_000), counts: [{ kind: "faucet", state: "submitted", count: 2 }] },
      { start: iso(minute), counts: [{ kind: "x402", state: "failed", count: 1 }] },
    ]);
  });

  it("gives p50 and p99 of creation to confirmation, in ms, for what was confirmed in the window", () => {
    expect(charts.time_to_confirmation).toEqual({
      from: iso(minute - 59 * 60_000),
      to: iso(minute + 60_000),
      transfers: { count: 6, p50_ms: 3_000, p99_ms: 1_200_000 },
      settlements: { count: 2, p50_ms: 500, p99_ms: 700 },
    });
  });

  it("shows free keys against the reserve and the last day's findings by class", () => {
    expect(charts.key_stock).toEqual({ free: 12, reserve: 10 });
    expect(charts.findings.by_class).toEqual([
      { class: "retryable", count: 1 },
      { class: "terminal_unknown", count: 2 },
    ]);
  });

  it("says a service wallet this node does not have is not configured, with its floor", () => {
    expect(charts.balances).toEqual([
      {
        wallet: "treasury",
        address: null,
        balance_units: null,
        floor_units: "5000000",
        below_floor: null,
        unknown_reason: "not_configured",
      },
      {
        wallet: "settler",
        address: null,
        balance_units: null,
        floor_units: "1000000",
        below_floor: null,
        unknown_reason: "not_configured",
      },
    ]);
  });
});
