import pino from "pino";
import { describe, expect, it } from "vitest";
import { composeOrigin } from "./compose.ts";
import { loadConfig } from "./config.ts";
import type { DatabaseHandle } from "./db/client.ts";
import { openInfrastructure } from "./open-infrastructure.ts";

// Unit level: the database is never reached by these routes, so an inert handle stands in.
const inertDatabase: DatabaseHandle = {
  db: undefined as never,
  driver: "pg",
  connectDirect: () => {
    throw new Error("no database in this test");
  },
  unbounded: () => {
    throw new Error("no database in this test");
  },
  ping: async () => {},
  close: async () => {},
};

async function originFor(env: Record<string, string>) {
  // No chain and no enclave configured: nothing here opens a connection.
  const opened = await openInfrastructure(loadConfig(env), pino({ level: "silent" }), {
    database: inertDatabase,
    processMetrics: false,
  });
  const composed = await composeOrigin(opened.infrastructure);
  if (!composed.ok) throw new Error(composed.error.errors.join("; "));
  return composed.value;
}

const GATEWAY_CAPABILITIES = ["registration", "openapi", "gateway", "x402"];

describe("gateway master switch", () => {
  it.each(["TRUE", "1", "yes", undefined])(
    "AGENT_GATEWAY_ENABLED=%j: /77/agent/v1/* is 404 and nothing is built",
    async (value) => {
      const origin = await originFor(value === undefined ? {} : { AGENT_GATEWAY_ENABLED: value });
      const response = await origin.app.request("/77/agent/v1/network");
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ error: { code: "not_found" } });
      const built = origin.capabilities.map((each) => each.name);
      expect(built.filter((name) => GATEWAY_CAPABILITIES.includes(name))).toEqual([]);
    },
  );

  it("mounts the gateway for the literal true, under BASE_PATH", async () => {
    const origin = await originFor({ AGENT_GATEWAY_ENABLED: "true", BASE_PATH: "/chain77" });
    expect(origin.capabilities.map((each) => each.name)).toEqual(
      expect.arrayContaining(GATEWAY_CAPABILITIES),
    );
    // Reached: the gateway itself answers (503: this unit-level origin has no database to
    // authenticate against), not the 404 of an unmounted path.
    const reached = await origin.app.request("/chain77/agent/v1/network");
    expect(reached.status).toBe(503);
    expect(await reached.json()).toMatchObject({ error: { code: "service_unavailable" } });
    expect((await origin.app.request("/77/agent/v1/network")).status).toBe(404);
  });

  it("answers unknown paths with the error envelope and a request id", async () => {
    const { app } = await originFor({});
    const response = await app.request("/77/nope");
    const body = (await response.json()) as { error: { request_id: string } };
    expect(response.status).toBe(404);
    expect(body.error.request_id).toBe(response.headers.get("x-request-id"));
  });

  it("serves the health check and reports a missing chain and no enclave endpoint", async () => {
    const { app } = await originFor({});
    const response = await app.request("/77/healthz");
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      status: "degraded",
      database: { ok: true },
      chain: { configured: false, ok: false },
      enclave: { configured: false, ok: false, policy_version: null, policy: null },
    });
  });
});
