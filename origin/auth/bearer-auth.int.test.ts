import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import { connectDatabase } from "../db/client.ts";
import { AppError, errorBody } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import { SlidingWindowLimiter } from "../http/rate-limiter.ts";
import { provisionIdentity } from "../keypool/provision.ts";
import { bearerAuth } from "./bearer-auth.ts";
import { createTokenLookup, type TokenLookup } from "./identity-repository.ts";
import { RecentAuthentications } from "./recent-authentications.ts";

// The middleware against the real identity store. Concurrency is produced for real: a table lock
// held in a transaction keeps every lookup waiting, so all requests are in flight at once.

/** The test's client address, per request: the x-test-client header, 198.18.0.9 without it. */
const CLIENT_HEADER = "x-test-client";

function appWith(
  lookup: TokenLookup,
  perAgent = 600,
  recentAuthentications = new RecentAuthentications(),
): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use("*", async (c, next) => {
    c.set("requestId", "req_test");
    c.set("clientIp", c.req.header(CLIENT_HEADER) ?? "198.18.0.9");
    await next();
  });
  app.use(
    "*",
    bearerAuth({
      lookup,
      failuresPerIp: new SlidingWindowLimiter({ limit: 60, windowSeconds: 60 }),
      recentAuthentications,
      requestsPerAgent: new SlidingWindowLimiter({ limit: perAgent, windowSeconds: 60 }),
    }),
  );
  app.get("/x", (c) => c.text("ok"));
  app.onError((error, c) =>
    error instanceof AppError
      ? c.json(errorBody(error.code, error.message, "req_test"), error.status)
      : c.text("bug", 500),
  );
  return app;
}

const badToken = () => `Bearer agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`;

describe("bearerAuth (real identity store)", () => {
  let testDb: TestDatabase;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 4);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  const issue = async (): Promise<string> => {
    const issued = await provisionIdentity(testDb.handle.db, { capabilities: ["read"], origin: "operator" });
    if (!issued.ok) throw new Error(issued.error.code);
    return issued.value.token;
  };

  /** Runs `send` while the token table is locked, so every lookup it starts waits for the lock. */
  async function whileTokensLocked<T>(send: () => Promise<T>): Promise<T> {
    let pending: Promise<T> | undefined;
    await testDb.handle.db.transaction(async (tx) => {
      await tx.execute(sql`lock table agent_tokens in access exclusive mode`);
      pending = send();
      await sleep(300);
    });
    return pending!;
  }

  it("answers 503, not 401 or 500, when the identity store cannot be read, and counts no failure", async () => {
    // A store that cannot be read: a pool to the same database, already ended.
    const closed = connectDatabase({ url: testDb.url, maxConnections: 1 });
    await closed.close();
    const app = appWith(createTokenLookup(closed.db));
    for (let i = 0; i < 70; i++) {
      const response = await app.request("/x", { headers: { authorization: badToken() } });
      expect(response.status).toBe(503);
      expect(await response.json()).toMatchObject({ error: { code: "service_unavailable" } });
    }
  });

  it("lets no more than 60 failed attempts from one IP through, even when all arrive before any fails", async () => {
    const app = appWith(createTokenLookup(testDb.handle.db));
    const statuses = await whileTokensLocked(() =>
      Promise.all(
        Array.from(
          { length: 100 },
          async () => (await app.request("/x", { headers: { authorization: badToken() } })).status,
        ),
      ),
    );
    expect(statuses.filter((status) => status === 401)).toHaveLength(60);
    expect(statuses.filter((status) => status === 429)).toHaveLength(40);
  });

  it("past an address's failure limit, lets through only the token ids that authenticated from it, and reads the store for no other", async () => {
    const [known, stranger] = await Promise.all([issue(), issue()]);
    // The real store, every read counted: the only database access of authentication.
    let lookups = 0;
    const store = createTokenLookup(testDb.handle.db);
    const recent = new RecentAuthentications();
    const app = appWith(
      (tokenId) => {
        lookups++;
        return store(tokenId);
      },
      600,
      recent,
    );
    const from = (ip: string, authorization: string) =>
      app.request("/x", { headers: { authorization, [CLIENT_HEADER]: ip } });
    const nat = "198.18.1.1";

    expect((await from(nat, `Bearer ${known}`)).status).toBe(200);
    for (let i = 0; i < 60; i++) expect((await from(nat, badToken())).status).toBe(401);
    expect(recent.size).toBe(1); // failures never enter it

    lookups = 0;
    for (let i = 0; i < 20; i++) {
      expect((await from(nat, badToken())).status).toBe(429);
      expect((await from(nat, "Bearer not-a-token")).status).toBe(429);
      expect((await from(nat, `Bearer ${known}`)).status).toBe(200);
    }
    // The known token's reads only: no bad token past the limit reached the store.
    expect(lookups).toBe(20);
    // A valid token that never worked from there waits like a bad one, without a read…
    lookups = 0;
    expect((await from(nat, `Bearer ${stranger}`)).status).toBe(429);
    expect(lookups).toBe(0);
    // …and works from elsewhere.
    expect((await from("198.18.1.2", `Bearer ${stranger}`)).status).toBe(200);

    // The known token id with a wrong secret is read, refused, and counted like any failure.
    const [, knownId] = /^agt_([0-9a-f]{32})_/.exec(known)!;
    lookups = 0;
    const wrongSecret = await from(nat, `Bearer agt_${knownId}_${randomBytes(32).toString("hex")}`);
    expect(wrongSecret.status).toBe(429);
    expect(lookups).toBe(1);
    expect(recent.size).toBe(2);
  });

  it("never holds back successful requests from one IP, however many are in flight at once", async () => {
    const issued = await provisionIdentity(testDb.handle.db, { capabilities: ["read"], origin: "operator" });
    if (!issued.ok) throw new Error(issued.error.code);
    const app = appWith(createTokenLookup(testDb.handle.db), 1_000);
    const statuses = await whileTokensLocked(() =>
      Promise.all(
        Array.from(
          { length: 200 },
          async () =>
            (await app.request("/x", { headers: { authorization: `Bearer ${issued.value.token}` } })).status,
        ),
      ),
    );
    expect(statuses.filter((status) => status === 200)).toHaveLength(200);
  });
});
