import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { send, type TestResponse } from "../../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";

// A request under {base}/agent/v1 that is none of the gateway's operations, against the real
// origin app and Postgres: what a client sees, and whether its address's failed-authentication
// budget (60 a minute, docs/api.md#rate-limits) pays for it.

/** The gateway's failed authentications an address may have in a minute. */
const FAILURES_PER_ADDRESS = 60;

describe("a path under /agent/v1 that is no route", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 2);
    origin = await startTestOrigin({
      database: testDb.handle,
      env: {
        AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
        AGENT_EDGE_SHARED_SECRET: randomBytes(32).toString("hex"),
        AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
      },
    });
  });
  afterAll(async () => {
    await origin?.close();
    await testDb?.drop();
  });

  const badToken = () => `agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`;
  const noSuchRoute = (answer: TestResponse, what: string) => {
    expect({ what, status: answer.status, body: answer.body }).toEqual({
      what,
      status: 404,
      body: { error: { code: "not_found", message: "no such route", request_id: expect.any(String) } },
    });
  };

  it("is 404 not_found, token or not, and costs the address no failed authentication: register/ with a trailing slash is not a 401", async () => {
    const from = "127.0.0.71";
    const issued = await provisionedIdentity(testDb.handle.db, {
      capabilities: ["read"],
      origin: "operator",
    });
    const valid = { authorization: `Bearer ${issued.token}` };
    const registration = {
      method: "POST",
      body: "{}",
      headers: { "x-svc-registration": "1" },
      localAddress: from,
    };
    // Mutation: bearer auth on every path under /agent/v1 ("*", as before) answers each of these
    // 401 agent_auth_failed without a token, and from the 61st the address is locked out (429).
    for (let i = 0; i <= FAILURES_PER_ADDRESS; i++) {
      noSuchRoute(await send(`${origin.base}/agent/v1/register/`, registration), `register/ #${i + 1}`);
    }
    const elsewhere: Array<[string, string]> = [
      ["GET", "/agent/v1/network/"],
      ["GET", "/agent/v1//network"],
      ["DELETE", "/agent/v1/network"],
      ["GET", "/agent/v1/nope"],
    ];
    for (const [method, path] of elsewhere) {
      noSuchRoute(await send(`${origin.base}${path}`, { method, localAddress: from }), `${method} ${path}`);
      noSuchRoute(
        await send(`${origin.base}${path}`, { method, localAddress: from, headers: valid }),
        `${method} ${path} with a valid token`,
      );
    }
    // The registration route itself is answered as registration (here, not through the edge).
    const register = await send(`${origin.base}/agent/v1/register`, registration);
    expect(register.body).toMatchObject({ error: { code: "registration_ingress_refused" } });
    // Nothing above was a failed authentication: a bad token from the address is its first, a 401.
    const bad = await send(`${origin.base}/agent/v1/network`, {
      localAddress: from,
      headers: { authorization: `Bearer ${badToken()}` },
    });
    expect(bad.body).toMatchObject({ error: { code: "agent_auth_failed" } });
  });
});
