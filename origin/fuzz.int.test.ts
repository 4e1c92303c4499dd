import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  HEADER_ADMIN_API_TOKEN,
  HEADER_EDGE_SECRET,
  HEADER_REGISTRATION,
  HEADER_REGISTRATION_ADMIN_TOKEN,
  HEADER_REGISTRATION_IP,
  RPC_MAX_BATCH_BYTES,
} from "../shared/constants.ts";
import { type FuzzStack, startFuzzStack } from "../testing/fuzz/fuzz-stack.ts";
import { envelopeProblem } from "../testing/fuzz/refusals.ts";
import { type FuzzRoute, fuzzRoutes } from "../testing/fuzz/routes.ts";
import { fuzzRoute, fuzzSettings } from "../testing/fuzz/run.ts";
import { sendEndlessBody, sendRaw } from "../testing/oversize.ts";

// Hostile input against the real origin process (Postgres, enclave, devnet real), one
// stack for the file: bodies and headers over their limits refused early, then every JSON route
// and every header the origin parses fuzzed. Each fuzz property prints its seed and case count;
// see testing/fuzz/run.ts (and docs/development.md) for a longer or replayed run.
const settings = fuzzSettings();

let stack: FuzzStack;
beforeAll(async () => {
  stack = await startFuzzStack({ runs: settings.runs });
}, 300_000);
afterAll(async () => {
  await stack?.close();
});

describe("bodies and headers over their limits are refused before they are read", () => {
  const bodyRoutes = () => {
    const agent = { authorization: `Bearer ${stack.agents[0]!.token}` };
    const admin = {
      [HEADER_ADMIN_API_TOKEN]: stack.secrets.adminApiToken,
      [HEADER_REGISTRATION_ADMIN_TOKEN]: stack.secrets.registrationAdmin,
    };
    return [
      { path: "/agent/v1/rpc", headers: agent, limit: RPC_MAX_BATCH_BYTES, jsonRpc: true },
      { path: "/agent/v1/faucet", headers: agent, limit: 4_096 },
      { path: "/agent/v1/transfers", headers: agent, limit: 4_096 },
      {
        path: "/agent/v1/register",
        headers: {
          [HEADER_EDGE_SECRET]: stack.secrets.edgeShared,
          [HEADER_REGISTRATION_IP]: "93.184.216.34",
          [HEADER_REGISTRATION]: "1",
        },
        limit: 1_024,
      },
      { path: "/admin/agents/registration/settings", headers: admin, limit: 4_096 },
      { path: "/admin/agents/registration/identity", headers: admin, limit: 4_096 },
    ];
  };
  const isRefusal413 = (route: { path: string; jsonRpc?: boolean }, status: number, body: unknown): void => {
    expect(status, `${route.path}: ${JSON.stringify(body)}`).toBe(413);
    if (route.jsonRpc) expect(body).toMatchObject({ jsonrpc: "2.0", error: { code: -32600 } });
    else {
      expect(envelopeProblem({ status, body, headers: {} })).toBeNull();
      expect(body).toMatchObject({ error: { code: "payload_too_large" } });
    }
  };

  it("a declared length of 10 GB: 413 while almost none of it was sent, on every route that takes a body", async () => {
    for (const route of bodyRoutes()) {
      const answer = await sendRaw(`${stack.origin.base}${route.path}`, {
        method: "POST",
        headers: {
          ...route.headers,
          "content-type": "application/json",
          "content-length": String(10 * 1024 ** 3),
        },
        body: '{"pad":"',
      });
      isRefusal413(route, answer.status, answer.body);
      expect(answer.sentBodyBytes).toBeLessThan(route.limit);
    }
  });

  it("an endless chunked body: refused (413, or the connection cut) after little more than the limit", async () => {
    for (const route of bodyRoutes()) {
      const outcome = await sendEndlessBody(`${stack.origin.base}${route.path}`, { headers: route.headers });
      // Cut off while streaming: a little past the limit plus what was in flight, never megabytes.
      expect(outcome.sent, route.path).toBeLessThan(4 * 1024 * 1024);
      if (outcome.kind === "answered") isRefusal413(route, outcome.status, outcome.body);
    }
    expect(await stack.answers()).toBe(true);
  });

  it("headers over 16 KiB: 431 in the error envelope, before any route", async () => {
    for (const path of [
      "/agent/v1/network",
      "/agent/v1/register",
      "/admin/agents/registration",
      "/healthz",
    ]) {
      const answer = await sendRaw(`${stack.origin.base}${path}`, {
        method: "GET",
        headers: { "x-padding": "a".repeat(20_000) },
      });
      expect(answer.status, path).toBe(431);
      expect(envelopeProblem({ status: answer.status, body: answer.body, headers: {} }), path).toBeNull();
      expect(answer.body).toMatchObject({ error: { code: "headers_too_large" } });
    }
    // Bytes that are no HTTP at all: 400 in the same envelope.
    const garbage = await sendRaw(`${stack.origin.base}/agent/v1/network`, {
      method: "GET\u0001",
      headers: {},
    });
    expect(garbage.status).toBe(400);
    expect(garbage.body).toMatchObject({ error: { code: "validation_failed" } });
  });
});

describe("fuzzing the origin's routes", () => {
  // Ordered as declared: the console's write routes last, since their successes change settings
  // and identities the other routes run under.
  const names = fuzzRoutes({ agentIds: [], wallets: [], webhookIds: [] }).map((route) => route.name);
  // Every route's arbitraries, built once the stack knows its ids and then kept for the file: a
  // build of all of them takes about 0.2 s of CPU, and each route's test took one. An arbitrary
  // holds no state between runs, so a route draws the same cases from the same seed either way.
  let routes: FuzzRoute[] | undefined;
  const routeNamed = (name: string): FuzzRoute => {
    if (!routes) {
      const agents = [...stack.agents, ...stack.readOnly];
      routes = fuzzRoutes({
        agentIds: agents.map((agent) => agent.agentId),
        wallets: agents.map((agent) => agent.wallet),
        webhookIds: stack.webhookIds,
      });
    }
    return routes.find((candidate) => candidate.name === name)!;
  };
  for (const name of names) {
    it.skipIf(settings.only !== undefined && !settings.only.includes(name))(
      `${name}: no 5xx, refusals in the spec's format, no state change from a refusal, the origin still answers`,
      async () => {
        const outcome = await fuzzRoute(stack, routeNamed(name), settings);
        expect(outcome.cases).toBe(Math.ceil(settings.runs / 8) * 8);
      },
      600_000,
    );
  }
});
