import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import {
  HEADER_ADDRESS_LOCKED,
  HEADER_ADDRESS_TOKENS,
  HEADER_AUTHENTICATED,
  HEADER_LOCKOUT_LANE,
} from "../../shared/constants.ts";
import { LOCKOUT_ALLOWANCE, LockoutAllowance } from "../../shared/lockout-allowance.ts";
import { SlidingWindowLimiter } from "../../shared/rate-limiter.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { holdLock } from "../../testing/held-lock.ts";
import { waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { connectDatabase } from "../db/client.ts";
import { AppError, errorBody } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import { bearerAuth, EDGE_LOCK_TOKENS_AT_MOST } from "./bearer-auth.ts";
import { createTokenLookup, type TokenLookup } from "./identity-repository.ts";
import { RecentAuthentications } from "./recent-authentications.ts";

// The middleware against the real identity store. Concurrency is produced for real: a table lock
// held in a transaction keeps every lookup waiting, so all requests are in flight at once.

/** The test's client address, per request: the x-test-client header, 198.18.0.9 without it. */
const CLIENT_HEADER = "x-test-client";
/** Present: the request is taken as the edge's (what a valid edge secret sets). */
const VIA_EDGE_HEADER = "x-test-via-edge";

function appWith(
  lookup: TokenLookup,
  perAgent = 600,
  recentAuthentications = new RecentAuthentications(),
  lockoutAllowance = new LockoutAllowance(),
): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use("*", async (c, next) => {
    c.set("requestId", "req_test");
    c.set("clientIp", c.req.header(CLIENT_HEADER) ?? "198.18.0.9");
    c.set("viaEdge", c.req.header(VIA_EDGE_HEADER) !== undefined);
    await next();
  });
  app.use(
    "*",
    bearerAuth({
      lookup,
      failuresPerIp: new SlidingWindowLimiter({ limit: 60, windowSeconds: 60 }),
      recentAuthentications,
      lockoutAllowance,
      requestsPerAgent: new SlidingWindowLimiter({ limit: perAgent, windowSeconds: 60 }),
    }),
  );
  app.get("/x", (c) => c.text("ok"));
  app.onError((error, c) =>
    error instanceof AppError
      ? c.json(errorBody(error.code, error.message, "req_test", error.fields), error.status, error.headers)
      : c.text("bug", 500),
  );
  return app;
}

const badToken = () => `Bearer agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`;

describe("bearerAuth (real identity store)", () => {
  let testDb: TestDatabase;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 17);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  const issue = async (): Promise<string> => {
    const issued = await provisionedIdentity(testDb.handle.db, {
      capabilities: ["read"],
      origin: "operator",
    });
    return issued.token;
  };

  /**
   * Runs `send` while the token table is locked, and lets it go once the first batch of lookups
   * (identity-repository.ts createTokenLookup) waits at the lock. Every request `send` makes has
   * entered the middleware by then, in send's own turn (app.request runs it in this process, up
   * to its first await), and those given a read are in that batch: they are all in flight, and
   * none has failed, when the first read can end.
   */
  async function whileTokensLocked<T>(send: () => Promise<T>): Promise<T> {
    const { db } = testDb.handle;
    const tokens = await holdLock(db, sql`lock table agent_tokens in access exclusive mode`);
    const pending = send();
    await waitUntilBlockedBy(db, {
      holder: tokens.pid,
      statement: 'from "agent_tokens"',
      what: "the first batch of token lookups waits at the lock of agent_tokens",
      timeoutMs: 20_000,
    });
    await tokens.release();
    return pending;
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
      expect(response.headers.get("retry-after")).toBe("1");
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

  /** The app over the real store, every read counted (the only database access of authentication). */
  const countedApp = (perAgent = 600) => {
    const store = createTokenLookup(testDb.handle.db);
    const recent = new RecentAuthentications();
    const counter = { lookups: 0 };
    const app = appWith(
      (tokenId) => {
        counter.lookups++;
        return store(tokenId);
      },
      perAgent,
      recent,
    );
    const from = (ip: string, authorization: string, headers: Record<string, string> = {}) =>
      app.request("/x", { headers: { ...headers, authorization, [CLIENT_HEADER]: ip } });
    const lockOut = async (ip: string) => {
      for (let i = 0; i < 60; i++) expect((await from(ip, badToken())).status).toBe(401);
    };
    return { from, recent, counter, lockOut };
  };

  it("past an address's failure limit, reads the store for the token ids that worked from it, and for 3 new ids and 6 that came back a minute, no more", async () => {
    // Mutation: LockoutAllowance admitting every id past the limit reads the store for all 20 bad
    // tokens and all 17 sent again (40 reads with the known token's, not 23).
    const [known, stranger] = await Promise.all([issue(), issue()]);
    const { from, recent, counter, lockOut } = countedApp();
    const nat = "198.18.1.1";

    expect((await from(nat, `Bearer ${known}`)).status).toBe(200);
    await lockOut(nat);
    expect(recent.size).toBe(1); // failures never enter it

    counter.lookups = 0;
    const sentOnce: string[] = [];
    for (let i = 0; i < 20; i++) {
      const bad = badToken();
      sentOnce.push(bad);
      expect((await from(nat, bad)).status).toBe(429);
      expect((await from(nat, "Bearer not-a-token")).status).toBe(429);
      expect((await from(nat, `Bearer ${known}`)).status).toBe(200);
    }
    // The known token's 20 reads, and 3 first sights of bad ids: the other 17 and the malformed
    // presentations reached no store.
    expect(counter.lookups).toBe(20 + LOCKOUT_ALLOWANCE.firstSight);
    // The 17 refused ids sent again: 6 come back into the store, then no more.
    counter.lookups = 0;
    for (const bad of sentOnce.slice(LOCKOUT_ALLOWANCE.firstSight))
      expect((await from(nat, bad)).status).toBe(429);
    expect(counter.lookups).toBe(LOCKOUT_ALLOWANCE.comeBack);
    // Both lanes are spent: a valid token that never worked from here waits, unread…
    counter.lookups = 0;
    const waited = await from(nat, `Bearer ${stranger}`);
    expect(waited.status).toBe(429);
    expect(counter.lookups).toBe(0);
    // …and works from elsewhere.
    expect((await from("198.18.1.2", `Bearer ${stranger}`)).status).toBe(200);
  });

  it("lets a fresh valid token in past the limit at once, or once it comes back after Retry-After while bad ids use up the first lane", async () => {
    // Mutation: LockoutAllowance without its come-back lane refuses the second stranger for good.
    const [first, second] = await Promise.all([issue(), issue()]);
    const { from, lockOut } = countedApp();
    const nat = "198.18.1.5";
    await lockOut(nat);
    expect((await from(nat, `Bearer ${first}`)).status).toBe(200);
    // Bad ids, each sent once, use up the first lane; the second stranger is told to come back.
    for (let i = 0; i < LOCKOUT_ALLOWANCE.firstSight; i++)
      expect((await from(nat, badToken())).status).toBe(429);
    const refused = await from(nat, `Bearer ${second}`);
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({
      error: { code: "rate_limited", retry_after: LOCKOUT_ALLOWANCE.retryAfterSeconds },
    });
    expect((await from(nat, `Bearer ${second}`)).status).toBe(200);
    // Both have worked from here now: they pass as known tokens, as often as they like.
    for (let i = 0; i < 10; i++) {
      expect((await from(nat, `Bearer ${first}`)).status).toBe(200);
      expect((await from(nat, `Bearer ${second}`)).status).toBe(200);
    }
  });

  it("tells the edge, and only the edge, how long an address is locked out and which tokens worked from it; of a large NAT, nothing", async () => {
    // Mutations: the lock named without the edge secret, or past the bound, fails below.
    const [known, fresh] = await Promise.all([issue(), issue()]);
    const { from, recent, lockOut } = countedApp();
    const viaEdge = { [VIA_EDGE_HEADER]: "1" };
    const nat = "198.18.1.9";
    expect((await from(nat, `Bearer ${known}`)).status).toBe(200);
    await lockOut(nat);
    const direct = await from(nat, badToken());
    expect(direct.status).toBe(429);
    expect([...direct.headers.keys()].filter((name) => name.startsWith("x-svc-"))).toEqual([]);
    const told = await from(nat, badToken(), viaEdge);
    expect(told.status).toBe(429);
    expect(Number(told.headers.get(HEADER_ADDRESS_LOCKED))).toBeGreaterThanOrEqual(59);
    expect(told.headers.get(HEADER_ADDRESS_TOKENS)).toBe(parseBearerHeader(`Bearer ${known}`)!.tokenId);
    // A request the edge let through its allowance hears whether it authenticated; others do not.
    const [ok, laneless] = [
      await from(nat, `Bearer ${fresh}`, { ...viaEdge, [HEADER_LOCKOUT_LANE]: "come_back" }),
      await from(nat, `Bearer ${known}`, viaEdge),
    ];
    expect([ok.status, ok.headers.get(HEADER_AUTHENTICATED)]).toEqual([200, "1"]);
    expect([laneless.status, laneless.headers.get(HEADER_AUTHENTICATED)]).toEqual([200, null]);

    // An address more tokens worked from than the edge is told of: no lock named at all.
    for (let i = 0; i < EDGE_LOCK_TOKENS_AT_MOST; i++) recent.remember(nat, `${i}`.padStart(32, "0"));
    const crowded = await from(nat, badToken(), viaEdge);
    expect(crowded.status).toBe(429);
    expect([crowded.headers.get(HEADER_ADDRESS_LOCKED), crowded.headers.get(HEADER_ADDRESS_TOKENS)]).toEqual([
      null,
      null,
    ]);
  });

  it("an attacker holding one valid token gets no more reads past the limit with its id and wrong secrets, nor by alternating it with bad tokens", async () => {
    // Mutation: bearerAuth not forgetting a known id that fails reads the store for all 20 wrong
    // secrets below.
    const valid = await issue();
    const [, id] = /^agt_([0-9a-f]{32})_/.exec(valid)!;
    const { from, recent, counter, lockOut } = countedApp();
    const nat = "198.18.1.7";
    expect((await from(nat, `Bearer ${valid}`)).status).toBe(200);
    await lockOut(nat);
    counter.lookups = 0;
    // Alternating the valid token with bad ones: the valid token's reads, and the first lane's 3.
    for (let i = 0; i < 10; i++) {
      expect((await from(nat, `Bearer ${valid}`)).status).toBe(200);
      expect((await from(nat, badToken())).status).toBe(429);
    }
    expect(counter.lookups).toBe(10 + LOCKOUT_ALLOWANCE.firstSight);
    // Its id with wrong secrets: read once as a known id, which it then is not; refused at first
    // sight (the lane is spent), read once more when it comes back, and then spent for the minute.
    counter.lookups = 0;
    for (let i = 0; i < 20; i++) {
      expect((await from(nat, `Bearer agt_${id}_${randomBytes(32).toString("hex")}`)).status).toBe(429);
    }
    expect(counter.lookups).toBe(2);
    expect(recent.has(nat, id!)).toBe(false);
  });

  it("remembers a token at an address only once the per-agent tier admitted it", async () => {
    // Mutation: remember() before the per-agent check makes the token known at the second address
    // while its agent is over its limit, and past that address's failure limit it is read (1).
    const token = await issue();
    const [, id] = /^agt_([0-9a-f]{32})_/.exec(token)!;
    const { from, recent, counter, lockOut } = countedApp(2);
    expect((await from("198.18.1.10", `Bearer ${token}`)).status).toBe(200);
    expect((await from("198.18.1.10", `Bearer ${token}`)).status).toBe(200);
    // Over its agent's limit: authenticated, refused 429 by the per-agent tier, not remembered.
    expect((await from("198.18.1.11", `Bearer ${token}`)).status).toBe(429);
    expect(recent.has("198.18.1.11", id!)).toBe(false);
    // Past that address's limit, with its first lane spent, the token is not read there.
    await lockOut("198.18.1.11");
    for (let i = 0; i < LOCKOUT_ALLOWANCE.firstSight; i++) await from("198.18.1.11", badToken());
    counter.lookups = 0;
    expect((await from("198.18.1.11", `Bearer ${token}`)).status).toBe(429);
    expect(counter.lookups).toBe(0);
  });

  it("reads the store for no more bad tokens arriving at once than for the same sent one by one: 60 and the allowance's 3", async () => {
    // Mutation: counting failures only once their read has ended (no reads in flight counted)
    // reads the store for all 200.
    const { from, counter } = countedApp();
    const statuses = await whileTokensLocked(() =>
      Promise.all(Array.from({ length: 200 }, async () => (await from("198.18.9.1", badToken())).status)),
    );
    expect(statuses.filter((status) => status === 401)).toHaveLength(60);
    expect(statuses.filter((status) => status === 429)).toHaveLength(140);
    expect(counter.lookups).toBe(60 + LOCKOUT_ALLOWANCE.firstSight);
  });

  it("lets valid tokens sent at once with 59 bad ones from their address in, each read once the bad reads leave it room", async () => {
    const valid = await Promise.all(Array.from({ length: 5 }, () => issue()));
    const { from, counter } = countedApp();
    const [bad, good] = await whileTokensLocked(() =>
      Promise.all([
        Promise.all(Array.from({ length: 59 }, async () => (await from("198.18.9.2", badToken())).status)),
        Promise.all(valid.map(async (token) => (await from("198.18.9.2", `Bearer ${token}`)).status)),
      ]),
    );
    expect(good).toEqual([200, 200, 200, 200, 200]);
    expect(bad).toEqual(Array(59).fill(401));
    expect(counter.lookups).toBe(64);
  });

  it("never holds back successful requests from one IP, however many are in flight at once", async () => {
    const issued = await provisionedIdentity(testDb.handle.db, {
      capabilities: ["read"],
      origin: "operator",
    });
    const app = appWith(createTokenLookup(testDb.handle.db), 1_000);
    const statuses = await whileTokensLocked(() =>
      Promise.all(
        Array.from(
          { length: 200 },
          async () =>
            (await app.request("/x", { headers: { authorization: `Bearer ${issued.token}` } })).status,
        ),
      ),
    );
    expect(statuses.filter((status) => status === 200)).toHaveLength(200);
  });
});
