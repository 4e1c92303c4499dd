import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consoleSecrets } from "../../testing/console-client.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { send, sendUnchecked } from "../../testing/http.ts";
import { createResponseChecker, everyRouteDocument } from "../../testing/openapi-check.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { buildOpenApiDocument, type OpenApiDocument } from "./document.ts";

// The OpenAPI document (docs/api.md): valid OpenAPI 3.1, served without a token, covering every
// route the origin mounts, and strict enough that the response check catches a wrong answer.

describe("OpenAPI document", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let gatewayOff: TestOrigin;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    // Every router on: the gateway, registration, the console (its tokens set).
    origin = await startTestOrigin({
      database: testDb.handle,
      env: { ...consoleSecrets().env, BASE_PATH: "/77" },
    });
    gatewayOff = await startTestOrigin({ database: testDb.handle, env: { AGENT_GATEWAY_ENABLED: "false" } });
  });
  afterAll(async () => {
    await origin?.close();
    await gatewayOff?.close();
    await testDb?.drop();
  });

  it("validates as OpenAPI 3.1, both documents", async () => {
    for (const audience of ["public", "admin"] as const) {
      const document = buildOpenApiDocument("/77", audience);
      expect(document.openapi).toBe("3.1.0");
      const result = await new Validator().validate(document);
      expect(result, audience).toEqual({ valid: true });
    }
  });

  it("is served at {base}/agent/v1/openapi.json without a token", async () => {
    const answer = await send(`${origin.base}/agent/v1/openapi.json`);
    expect(answer.status).toBe(200);
    expect(answer.headers["content-type"]).toMatch(/^application\/json/);
    expect(answer.body).toEqual(JSON.parse(JSON.stringify(buildOpenApiDocument("/77", "public"))));
    // With the gateway switch off, every /agent/v1/* path is 404, this one too
    // (docs/api.md#the-switches).
    const off = await send(`${gatewayOff.base}/agent/v1/openapi.json`);
    expect(off.status).toBe(404);
    // So is every other public route the document names, each 404 one it declares (`send` checks).
    for (const path of ["/.well-known/webhooks/keys", "/x402/demo", "/x402/facilitator/supported"]) {
      expect((await send(`${gatewayOff.base}${path}`)).status, path).toBe(404);
    }
  });

  it("the public document names the gateway, registration, x402 and the webhooks' keys only; the console's is served on the private origin", async () => {
    // Mutation: the public document built from every descriptor names /admin/… and /metrics.
    const open = (await send(`${origin.base}/agent/v1/openapi.json`)).body as OpenApiDocument;
    const paths = Object.keys(open.paths);
    expect(paths.filter((path) => !/^\/(agent\/v1|x402)\//.test(path))).toEqual([
      "/.well-known/webhooks/keys",
    ]);
    expect(paths).toEqual(expect.arrayContaining(["/agent/v1/register", "/x402/facilitator/settle"]));
    expect(Object.keys(open.components.securitySchemes)).toEqual(["agentToken"]);
    const text = JSON.stringify(open);
    for (const privateName of [
      "/admin/",
      "/metrics",
      "/healthz",
      "x-admin-api-token",
      "x-registration-admin-token",
    ]) {
      expect(text.includes(privateName), privateName).toBe(false);
    }
    // The console's own, at its private path, with no token (like the page, it holds no data).
    const admin = await send(`${origin.base}/admin/openapi.json`);
    expect(admin.status).toBe(200);
    const adminPaths = Object.keys((admin.body as OpenApiDocument).paths);
    expect(adminPaths).toEqual(
      expect.arrayContaining([
        "/admin/agents/registration/settings",
        "/metrics",
        "/healthz",
        "/admin/openapi.json",
      ]),
    );
    expect(adminPaths.filter((path) => paths.includes(path))).toEqual([]);
    // Without the console's token configured, its document is gone with it.
    expect((await send(`${gatewayOff.base}/admin/openapi.json`)).status).toBe(404);
  });

  it("documents every route the origin mounts (drift)", () => {
    const document = everyRouteDocument("/77");
    const mounted = origin.app.routes
      // `use` middleware is mounted as ALL; a route is a method and a path without wildcards.
      .filter((route) => route.method !== "ALL" && !route.path.includes("*"))
      .map((route) => ({
        method: route.method.toLowerCase(),
        path: route.path.replace(/^\/77/, "").replace(/:([a-z_]+)/g, "{$1}"),
      }));
    expect(mounted.length).toBeGreaterThan(10);
    const undocumented = mounted.filter(({ method, path }) => !document.paths[path]?.[method]);
    expect(undocumented).toEqual([]);
  });

  it("declares the headers the spec requires, and the response check refuses an answer without them", async () => {
    // Spec: a 429 carries Retry-After (registration's too); the demo's 402 carries the quote in
    // PAYMENT-REQUIRED; registration's 201 (the token shown once) must not be cached.
    // Mutation: a document without response headers fails every line below.
    type Responses = Record<string, { headers?: Record<string, { required?: boolean }> }>;
    const open = (await send(`${origin.base}/agent/v1/openapi.json`)).body as {
      paths: Record<string, Record<string, { responses: Responses }>>;
    };
    const required = (path: string, method: string, status: number) =>
      Object.entries(open.paths[path]![method]!.responses[String(status)]!.headers ?? {})
        .filter(([, header]) => header.required)
        .map(([name]) => name);
    expect(required("/agent/v1/register", "post", 429)).toEqual(["Retry-After"]);
    expect(required("/agent/v1/register", "post", 201)).toEqual(["Cache-Control"]);
    expect(required("/agent/v1/token/rotate", "post", 200)).toEqual(["Cache-Control"]);
    expect(required("/agent/v1/network", "get", 429)).toEqual(["Retry-After"]);
    expect(required("/agent/v1/rpc", "post", 429)).toEqual(["Retry-After"]);
    expect(required("/x402/demo", "get", 402)).toEqual(["PAYMENT-REQUIRED"]);
    expect(required("/x402/facilitator/settle", "post", 429)).toEqual(["Retry-After"]);

    const checker = createResponseChecker();
    const limited = {
      method: "GET",
      url: `${origin.base}/agent/v1/network`,
      status: 429,
      contentType: "application/json",
      body: {
        error: { code: "rate_limited", message: "too many requests", request_id: "req_1", retry_after: 3 },
      },
    };
    expect(checker.check({ ...limited, headers: { "retry-after": "3" } })).toEqual([]);
    expect(checker.check({ ...limited, headers: {} })[0]).toMatch(/no Retry-After header/);
  });

  it("declares Retry-After on every 429 of both documents, and the console's refusal carries it", async () => {
    // Every 429 the origin answers names its wait (docs/api.md#conventions), the console's too: a
    // client generated from either document must be told to read it (optional only where a
    // repeated money refusal whose wait is over leaves it out).
    // Mutation: a console 429 declared without its header fails the first expectation.
    const undeclared: string[] = [];
    for (const audience of ["public", "admin"] as const) {
      const document = buildOpenApiDocument("/77", audience) as unknown as {
        paths: Record<
          string,
          Record<string, { responses: Record<string, { headers?: Record<string, { required?: boolean }> }> }>
        >;
      };
      for (const [path, methods] of Object.entries(document.paths)) {
        for (const [method, operation] of Object.entries(methods)) {
          const limited = operation.responses["429"];
          if (limited && limited.headers?.["Retry-After"] === undefined)
            undeclared.push(`${audience} ${method.toUpperCase()} ${path}`);
        }
      }
    }
    expect(undeclared).toEqual([]);

    // A real console 429, past the failed admin authentications one address may make: `send`
    // refuses it if the header the document now requires is missing.
    const wrong = { "x-admin-api-token": "w".repeat(64) };
    const from = { localAddress: "127.0.0.91" };
    let answer = await send(`${origin.base}/admin/agents/registration`, { headers: wrong, ...from });
    for (let i = 0; i < 25 && answer.status === 401; i++)
      answer = await send(`${origin.base}/admin/agents/registration`, { headers: wrong, ...from });
    expect(answer.status).toBe(429);
    expect(Number(answer.headers["retry-after"])).toBeGreaterThan(0);
  });

  it("the response check refuses an undeclared status and a body off its schema", async () => {
    const checker = createResponseChecker();
    const url = "http://127.0.0.1:1/77/agent/v1/balance";
    const balance = {
      address: "0x0000000000000000000000000000000000000001",
      balance: "1",
      decimals: 6,
      symbol: "USDC",
      balance_wei: "1000000000000",
      block_number: "3",
    };
    const answer = { method: "GET", url, contentType: "application/json" };
    expect(checker.check({ ...answer, status: 200, body: balance })).toEqual([]);
    expect(checker.check({ ...answer, status: 200, body: { ...balance, balance: 1 } })[0]).toMatch(
      /body \/balance must be string/,
    );
    expect(checker.check({ ...answer, status: 200, body: { ...balance, extra: true } })[0]).toMatch(
      /additional properties/,
    );
    expect(checker.check({ ...answer, status: 418, body: balance })[0]).toMatch(/declares no such status/);
    // A real answer checked as what it is conforms; the same body claimed for a 200 does not.
    const refused = await sendUnchecked(`${origin.base}/agent/v1/network`);
    expect(refused.status).toBe(401);
    const real = { method: "GET", url: `${origin.base}/agent/v1/network`, contentType: "application/json" };
    expect(checker.check({ ...real, status: 401, body: refused.body })).toEqual([]);
    expect(checker.check({ ...real, status: 200, body: refused.body }).length).toBeGreaterThan(0);
  });
});
