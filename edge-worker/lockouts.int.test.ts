import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATIONS } from "../origin/openapi/operations.ts";
import { LOCKOUT_ALLOWANCE } from "../shared/lockout-allowance.ts";
import { sleep } from "../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { type EdgeHandle, startTestEdge } from "../testing/edge.ts";
import { send, type TestResponse } from "../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../testing/origin.ts";
import { provisionedIdentity, seedFreeKeys } from "../testing/seed.ts";
import { PUBLIC_AGENT_PATHS } from "./lockouts.ts";

// The gateway's pre-auth lockout held at the edge (lockouts.ts): the real worker in Miniflare,
// behind the local front that takes the client's address from the connection, in front of the
// real origin app and Postgres. Clients are told apart by their loopback source address. What
// reaches the origin is read from its request log, one line per request it answered.

const EDGE_SECRET = randomBytes(32).toString("hex");
/** The gateway's failed authentications an address may have in a minute (docs/api.md#rate-limits). */
const FAILURES_PER_ADDRESS = 60;

describe("the pre-auth lockout at the edge", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let edge: EdgeHandle;
  const requestLines: { status: number }[] = [];

  const issue = async (): Promise<string> => {
    const issued = await provisionedIdentity(testDb.handle.db, {
      capabilities: ["read"],
      origin: "operator",
    });
    return issued.token;
  };
  const badToken = () => `agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`;
  const network = (from: string, token?: string): Promise<TestResponse> =>
    send(`${edge.url}/77/agent/v1/network`, {
      localAddress: from,
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    });
  /** Spends the address's failures, then has the origin refuse it once: the edge now holds it locked. */
  const lockOut = async (from: string): Promise<void> => {
    for (let i = 0; i < FAILURES_PER_ADDRESS; i++) expect((await network(from, badToken())).status).toBe(401);
    expect((await network(from, badToken())).status).toBe(429);
  };
  const privateHeaders = (response: TestResponse) =>
    Object.keys(response.headers).filter((name) => name.startsWith("x-svc-"));

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 4);
    origin = await startTestOrigin({
      database: testDb.handle,
      env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET },
      onLogLine: (line) => {
        const entry = JSON.parse(line) as { msg?: string; status?: number };
        if (entry.msg === "request" && entry.status !== undefined)
          requestLines.push({ status: entry.status });
      },
    });
    edge = await startTestEdge({ originUrl: origin.url, edgeSharedSecret: EDGE_SECRET, onLine: () => {} });
  });
  afterAll(async () => {
    await edge?.stop();
    await origin?.close();
    await testDb?.drop();
  });

  it("refuses a locked-out address's new bad tokens itself, and passes on the tokens that worked from it", async () => {
    const token = await issue();
    const from = "127.0.0.51";
    expect((await network(from, token)).status).toBe(200);
    await lockOut(from);

    const before = requestLines.length;
    const flood = await Promise.all(Array.from({ length: 40 }, () => network(from, badToken())));
    expect(flood.map((response) => response.status)).toEqual(Array(40).fill(429));
    for (const response of flood) {
      expect(response.body).toMatchObject({ error: { code: "rate_limited" } });
      expect(Number(response.headers["retry-after"])).toBeGreaterThanOrEqual(1);
      expect(privateHeaders(response)).toEqual([]);
    }
    // Only the lockout allowance's first sights of the minute were passed on.
    expect(requestLines.length - before).toBe(LOCKOUT_ALLOWANCE.firstSight);
    // Nor does a request without a token reach the origin.
    expect((await network(from)).status).toBe(429);
    expect(requestLines.length - before).toBe(LOCKOUT_ALLOWANCE.firstSight);

    // The agent sharing the address goes on, and another address is not locked.
    for (let i = 0; i < 5; i++) expect((await network(from, token)).status).toBe(200);
    expect((await network("127.0.0.52", badToken())).status).toBe(401);
  });

  it("lets a fresh token it told to come back in on its return, through the origin's come-back lane too", async () => {
    const from = "127.0.0.53";
    await lockOut(from);
    // The first sights of the minute go to bad tokens.
    for (let i = 0; i < LOCKOUT_ALLOWANCE.firstSight + 2; i++) {
      expect((await network(from, badToken())).status).toBe(429);
    }
    const fresh = await issue();
    const refused = await network(from, fresh);
    expect(refused.status).toBe(429);
    expect(refused.headers["retry-after"]).toBe("1");
    await sleep(1_100);
    const before = requestLines.length;
    expect((await network(from, fresh)).status).toBe(200);
    // Once it has authenticated from the address, it is passed on as the tokens the origin named.
    for (let i = 0; i < LOCKOUT_ALLOWANCE.comeBack + 2; i++) {
      expect((await network(from, fresh)).status).toBe(200);
    }
    expect(requestLines.length - before).toBe(LOCKOUT_ALLOWANCE.comeBack + 3);
  });

  it("tells only the edge what it holds: a client reaching the origin without the secret gets no lockout headers", async () => {
    const direct = (token: string) =>
      send(`${origin.base}/agent/v1/network`, {
        localAddress: "127.0.0.54",
        headers: { authorization: `Bearer ${token}` },
      });
    for (let i = 0; i < FAILURES_PER_ADDRESS; i++) expect((await direct(badToken())).status).toBe(401);
    const refused = await direct(badToken());
    expect(refused.status).toBe(429);
    expect(privateHeaders(refused)).toEqual([]);
  });

  it("shows a locked-out client no lockout header on a public path's other methods either, which the origin authenticates", async () => {
    const token = await issue();
    const from = "127.0.0.55";
    expect((await network(from, token)).status).toBe(200);
    await lockOut(from);
    for (const path of PUBLIC_AGENT_PATHS) {
      for (const method of ["POST", "PUT", "DELETE", "OPTIONS"]) {
        // Mutation: passing these on as the public GET is (proxy.ts passThrough) shows the client
        // the origin's word to the edge: how long the address is locked and the ids of the tokens
        // that worked from it, another agent's behind the same address among them.
        const answer = await send(`${edge.url}/77${path}`, { method, localAddress: from });
        expect(answer.status, `${method} ${path}`).toBe(429);
        expect(privateHeaders(answer), `${method} ${path}`).toEqual([]);
        expect(JSON.stringify(answer.headers), `${method} ${path}`).not.toContain(token.split("_")[1]!);
      }
      // The document itself is still anyone's.
      expect((await send(`${edge.url}/77${path}`, { localAddress: from })).status).toBe(200);
    }
  });

  it("passes on every public path under /agent/v1, which the origin answers without a token", () => {
    const publicOperations = OPERATIONS.filter(
      (operation) =>
        operation.security.length === 0 &&
        operation.path.startsWith("/agent/v1/") &&
        operation.path !== "/agent/v1/register",
    );
    const publicPaths = publicOperations.map((operation) => operation.path);
    expect([...publicPaths].sort()).toEqual([...PUBLIC_AGENT_PATHS].sort());
    // The edge passes on their GET alone (index.ts): a public operation of another method would be
    // locked out with the gateway's.
    expect(publicOperations.map((operation) => operation.method.toLowerCase())).toEqual(
      publicOperations.map(() => "get"),
    );
  });
});
