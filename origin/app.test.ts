import { Hono } from "hono";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { createApp } from "./app.ts";
import { loadConfig } from "./config.ts";
import type { DatabaseHandle } from "./db/client.ts";
import { type AppDeps, systemClock } from "./deps.ts";
import type { AppEnv } from "./http/env.ts";
import { createDormantSignerClient } from "./signer/dormant-stub.ts";

// Unit level: the database is never reached by these routes, so an inert handle stands in.
const inertDatabase: DatabaseHandle = {
  db: undefined as never,
  driver: "pg",
  ping: async () => {},
  close: async () => {},
};

function depsFor(env: Record<string, string>): AppDeps {
  return {
    config: loadConfig(env),
    database: inertDatabase,
    chain: undefined,
    rpc: undefined,
    signer: createDormantSignerClient(),
    logger: pino({ level: "silent" }),
    clock: systemClock,
  };
}

function gatewayProbe(): { built: number; factory: (deps: AppDeps) => Hono<AppEnv> } {
  const probe = {
    built: 0,
    factory: () => {
      probe.built++;
      const router = new Hono<AppEnv>();
      router.get("/network", (c) => c.json({ reached: true }));
      return router;
    },
  };
  return probe;
}

describe("gateway master switch", () => {
  it.each(["TRUE", "1", "yes", undefined])(
    "AGENT_GATEWAY_ENABLED=%j: /77/agent/v1/* is 404 and nothing is built",
    async (value) => {
      const probe = gatewayProbe();
      const app = createApp(depsFor(value === undefined ? {} : { AGENT_GATEWAY_ENABLED: value }), {
        gateway: probe.factory,
      });
      const response = await app.request("/77/agent/v1/network");
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ error: { code: "not_found" } });
      expect(probe.built).toBe(0);
    },
  );

  it("mounts the gateway for the literal true, under BASE_PATH", async () => {
    const probe = gatewayProbe();
    const app = createApp(depsFor({ AGENT_GATEWAY_ENABLED: "true", BASE_PATH: "/chain77" }), {
      gateway: probe.factory,
    });
    expect(probe.built).toBe(1);
    expect((await app.request("/chain77/agent/v1/network")).status).toBe(200);
    expect((await app.request("/77/agent/v1/network")).status).toBe(404);
  });

  it("answers unknown paths with the error envelope and a request id", async () => {
    const app = createApp(depsFor({}));
    const response = await app.request("/77/nope");
    const body = (await response.json()) as { error: { request_id: string } };
    expect(response.status).toBe(404);
    expect(body.error.request_id).toBe(response.headers.get("x-request-id"));
  });

  it("serves the health check and reports a missing chain and no enclave endpoint", async () => {
    const app = createApp(depsFor({}));
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
