import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../scripts/test/database.ts";
import { seedFreeKeys } from "../../scripts/test/seed.ts";
import { connectDatabase } from "../db/client.ts";
import { AppError, errorBody } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import { SlidingWindowLimiter } from "../http/rate-limiter.ts";
import { provisionIdentity } from "../keypool/provision.ts";
import { bearerAuth } from "./bearer-auth.ts";
import { createTokenLookup, type TokenLookup } from "./identity-repository.ts";

// The middleware against the real identity store. Concurrency is produced for real: a table lock
// held in a transaction keeps every lookup waiting, so all requests are in flight at once.

function appWith(lookup: TokenLookup, perAgent = 600): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use("*", async (c, next) => {
    c.set("requestId", "req_test");
    c.set("clientIp", "198.18.0.9");
    await next();
  });
  app.use(
    "*",
    bearerAuth({
      lookup,
      failuresPerIp: new SlidingWindowLimiter({ limit: 60, windowSeconds: 60 }),
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
    await seedFreeKeys(testDb.handle.db, 2);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  /** Runs `send` while the token table is locked, so every lookup it starts waits for the lock. */
  async function whileTokensLocked<T>(send: () => Promise<T>): Promise<T> {
    let pending: Promise<T> | undefined;
    await testDb.handle.db.transaction(async (tx) => {
      await tx.execute(sql`lock table agent_tokens in access exclusive mode`);
      pending = send();
      await new Promise((resolve) => setTimeout(resolve, 300));
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
