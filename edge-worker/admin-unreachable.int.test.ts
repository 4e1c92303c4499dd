import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HEADER_ADMIN_API_TOKEN, HEADER_REGISTRATION_ADMIN_TOKEN } from "../shared/constants.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { type EdgeHandle, startTestEdge } from "../testing/edge.ts";
import { send } from "../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../testing/origin.ts";

// Admin routes are not opened through the public edge (docs/security.md, "Anyone on the network"):
// {base}/admin/… (the console's OpenAPI document among them) and {base}/metrics, in every spelling a
// client can send, never reach the console through the real worker in Miniflare, even with the
// right tokens: through the local front (whose Miniflare entry worker parses the URL again), and on
// the worker's own socket, where the worker meets a path as the client spelled it.

const ADMIN_TOKEN = randomBytes(32).toString("hex");
const CHANGE_TOKEN = randomBytes(32).toString("hex");
const EDGE_SECRET = randomBytes(32).toString("hex");

const TARGETS = [
  { method: "GET", path: "admin/agents/registration" },
  { method: "GET", path: "admin/agents/audit" },
  { method: "GET", path: "admin/agents" },
  { method: "POST", path: "admin/agents/registration/settings" },
  { method: "GET", path: "metrics" },
  // The console's OpenAPI document: the public one, which the edge serves, names none of these.
  // Mutation: an edge forwarding {base}/admin/openapi.json serves it (200) through the edge.
  { method: "GET", path: "admin/openapi.json" },
] as const;

/** Every spelling of `/77/<path>`: case, encoded slashes and dots, `..`, double slashes, trailing dots. */
function spellings(path: string): string[] {
  const upper = path.toUpperCase();
  const title = path.replace(/(^|\/)([a-z])/g, (_, slash: string, c: string) => slash + c.toUpperCase());
  const slashes = path.replaceAll("/", "%2F");
  const lowerSlashes = path.replaceAll("/", "%2f");
  const firstEncoded = `%${path.charCodeAt(0).toString(16)}${path.slice(1)}`;
  const [head, ...rest] = path.split("/");
  const tail = rest.length ? `/${rest.join("/")}` : "";
  return [
    `/77/${path}`,
    `/77/${upper}`,
    `/77/${title}`,
    `/77/${slashes}`,
    `/77%2F${path}`,
    `/77%2f${lowerSlashes}`,
    `/77/${firstEncoded}`,
    `//77/${path}`,
    `/77//${path}`,
    `/77/${head}//${rest.join("/")}`,
    `/77/${head}.${tail}`,
    `/77/${path}.`,
    `/77/${path}/`,
    `/77/${path}/.`,
    `/77/${path}%2e`,
    `/77/${path};x=1`,
    `/77/${path}?x=1`,
    `/77/${path}%00`,
    `/77/./${path}`,
    `/77/%2e/${path}`,
    `/77/agent/v1/../../${path}`,
    `/77/agent/v1/../../77/${path}`,
    `/77/agent/v1/%2e%2e/%2e%2e/77/${path}`,
    `/77/agent/v1/%2E%2E/%2E%2E/${path}`,
    `/77/agent/v1/..%2F..%2F${path}`,
    `/77/agent/v1/..%2f..%2f77%2f${slashes}`,
    `/77/agent/v1/..%5C..%5C${path}`,
    `/77/agent/v1\\..\\..\\${path}`,
    `/77/agent/v1/%252e%252e/%252e%252e/${path}`,
    `/77/x402/../${path}`,
    `/77/x402/%2e%2e/${path}`,
    `/77/x402/..%2F${path}`,
    `/77/agent/v1/register/../../../${path}`,
    `/77/agent/v1/${path}`,
    `/77/x402/${path}`,
    `/${path}`,
    `/77/ ${path}`,
    `/77/${path} `,
    `http://127.0.0.1/77/${path}`,
  ];
}

describe("admin routes are unreachable through the edge", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let edge: EdgeHandle;
  /** What the origin served: its request log lines' route and status. */
  const served: { route: string; status: number }[] = [];

  beforeAll(async () => {
    testDb = await createTestDatabase();
    origin = await startTestOrigin({
      database: testDb.handle,
      env: {
        AGENT_ADMIN_API_TOKEN: ADMIN_TOKEN,
        AGENT_REGISTRATION_ADMIN_SECRET: CHANGE_TOKEN,
        AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
      },
      onLogLine: (line) => {
        const entry = JSON.parse(line) as { msg?: string; route?: string; status?: number };
        if (entry.msg === "request" && entry.route !== undefined && entry.status !== undefined)
          served.push({ route: entry.route, status: entry.status });
      },
    });
    edge = await startTestEdge({
      originUrl: origin.url,
      edgeSharedSecret: EDGE_SECRET,
      directSocket: true,
      onLine: () => {},
    });
  });
  afterAll(async () => {
    await edge?.stop();
    await origin?.close();
    await testDb?.drop();
  });

  const headers = {
    [HEADER_ADMIN_API_TOKEN]: ADMIN_TOKEN,
    [HEADER_REGISTRATION_ADMIN_TOKEN]: CHANGE_TOKEN,
    authorization: `Bearer ${ADMIN_TOKEN}`,
  };
  const body = JSON.stringify({ changes: { paused: false }, reason: "through the edge" });

  it("the tokens open every target at the origin itself (so the refusals below are the edge's doing)", async () => {
    for (const target of TARGETS) {
      const response = await send(`${origin.base}/${target.path}`, {
        method: target.method,
        headers,
        ...(target.method === "POST" ? { body } : {}),
      });
      expect(response.status, target.path).toBe(200);
    }
  });

  it("every spelling through the edge is refused, and the origin serves none of them", async () => {
    served.length = 0;
    const answers: string[] = [];
    const entries = [edge.url, edge.directUrl!.origin];
    for (const target of TARGETS) {
      for (const [entry, spelling] of spellings(target.path).flatMap((s) => entries.map((e) => [e, s]))) {
        const response = await send(`${entry}${spelling}`, {
          rawPath: spelling,
          method: target.method,
          headers,
          ...(target.method === "POST" ? { body } : {}),
        }).catch((error: Error) => ({ status: 0, body: error.message, headers: {} }));
        answers.push(
          `${target.method} ${entry}${spelling} → ${response.status} ${JSON.stringify(response.body).slice(0, 120)}`,
        );
        // Refused, whoever refused it: the worker's 404, the gateway's 401, or (for a few POST
        // spellings) the local front's 502 when workerd drops the connection (dev/edge.ts).
        expect(response.status === 0 || response.status >= 400, answers.at(-1)).toBe(true);
        expect(JSON.stringify(response.body), spelling).not.toMatch(
          /settings|identities|# HELP|# TYPE|<html|consoleOpenApi/i,
        );
      }
    }
    // What reached the origin at all went to the gateway (bearer refusal) or nowhere (404).
    const consoleServed = served.filter((entry) => entry.status < 400 || entry.status === 403);
    expect(consoleServed, answers.join("\n")).toEqual([]);
    for (const entry of served) expect([401, 404, 429], entry.route).toContain(entry.status);
  });

  // The edge routes on a segment as the client spelled it; a TLS proxy before the origin that
  // decodes `%2F` or `%5C` splits it there, so what the edge routed to the gateway or the x402
  // routes would reach the origin as another route (an admin one here). Every route the edge
  // forwards is tried, the separator in each case.
  it("an encoded slash or backslash inside a path segment is the edge's 400, and reaches the origin on no entry", async () => {
    served.length = 0;
    const paths = [
      "/77/agent/v1/x%2F..%2F..%2Fadmin/agents",
      "/77/agent/v1/x%2f..%2f..%2fadmin%2fagents",
      "/77/agent/v1/x%5C..%5C..%5Cadmin/agents/registration",
      "/77/agent/v1/actions/x%5c..%5c..%5c..%5cadmin%5cagents",
      "/77/agent/v1/register%2F..%2F..%2F..%2Fadmin/agents/registration/settings",
      "/77/agent/v1/network%2F..%2F..%2F..%2Fmetrics",
      "/77/x402/demo%2F..%2F..%2Fadmin/agents",
      "/77/x402/facilitator/settlements/tx/0x1%2F..%2F..%2F..%2F..%2Fadmin/agents",
      "/77/x402/facilitator/verify%5C..%5C..%5C..%5Cadmin/agents/registration/settings",
    ];
    const answers: { request: string; status: number; body: unknown }[] = [];
    for (const entry of [edge.url, edge.directUrl!.origin]) {
      for (const path of paths) {
        const method = /register|verify/.test(path) ? "POST" : "GET";
        const response = await send(`${entry}${path}`, {
          rawPath: path,
          method,
          headers,
          ...(method === "POST" ? { body } : {}),
        });
        answers.push({ request: `${method} ${entry}${path}`, status: response.status, body: response.body });
      }
    }
    expect(served, "the origin's request log").toEqual([]);
    for (const answer of answers) {
      expect(answer.status, answer.request).toBe(400);
      expect(answer.body, answer.request).toMatchObject({
        error: { code: "validation_failed", message: expect.stringMatching(/encoded slash or backslash/) },
      });
    }
  });
});
