import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { connectDatabase, type DatabaseHandle, POOL_WAIT_MS } from "./client.ts";

// Every connection of the origin's pool taken, and kept: here by statements on the origin's own
// pool that wait on a lock the test holds (as a batch waits behind another node's, or as queries
// wait on a database that stopped answering). The next request must be told the database is
// unavailable, not wait for good.

const POOL_SIZE = 2;
/**
 * The pool's wait for a connection here: shorter than POOL_WAIT_MS's 10 s, which the test would
 * spend waiting, and long enough to tell a request that waited for it from one refused at once.
 */
const POOL_WAIT_TEST_MS = 2_000;

function agentToken(): string {
  return `agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`;
}

function balance(origin: TestOrigin, signal?: AbortSignal): Promise<Response> {
  return fetch(`${origin.base}/agent/v1/balance`, {
    headers: { authorization: `Bearer ${agentToken()}` },
    ...(signal ? { signal } : {}),
  });
}

describe("a request when every connection of the pool is taken (real Postgres)", () => {
  let testDb: TestDatabase;
  let database: DatabaseHandle;
  let origin: TestOrigin;
  let locker: pg.Client;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    database = connectDatabase({
      url: testDb.url,
      driver: "pg",
      maxConnections: POOL_SIZE,
      poolWaitMs: POOL_WAIT_TEST_MS,
    });
    origin = await startTestOrigin({ database, workers: [] });
    locker = new pg.Client({ connectionString: testDb.url });
    await locker.connect();
  });
  afterAll(async () => {
    await locker?.end().catch(() => {});
    await origin?.close();
    await database?.close();
    await testDb?.drop();
  });

  it("answers 503 service_unavailable within the pool's wait, then serves again once connections come back", async () => {
    expect((await balance(origin)).status).toBe(401);

    await locker.query("begin");
    await locker.query("lock table agent_tokens in access exclusive mode");
    // `.then` sends it: a drizzle query runs once awaited.
    const holders = Array.from({ length: POOL_SIZE }, () =>
      database.db.execute(sql`select count(*) from agent_tokens`).then(() => "held"),
    );
    // Let the holders take every connection and reach the lock: the pool's statements blocked by
    // this session, not any waiter on a table of that name (another file's database has one).
    const { rows } = await locker.query<{ pid: number }>("select pg_backend_pid() as pid");
    // Asked on the test database's own pool: the origin's has no connection left.
    await waitUntilBlockedBy(testDb.handle.db, {
      holder: rows[0]!.pid,
      statement: "^select count\\(\\*\\) from agent_tokens",
      count: POOL_SIZE,
      what: "every connection of the pool waits at the lock",
      timeoutMs: 10_000,
    });

    const started = performance.now();
    const response = await balance(origin, AbortSignal.timeout(POOL_WAIT_TEST_MS + 20_000)).catch(
      (error: unknown) => {
        throw new Error(
          `no answer ${POOL_WAIT_TEST_MS / 1000 + 20} s after every connection was taken: ${String(error)}`,
        );
      },
    );
    const seconds = (performance.now() - started) / 1000;
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ error: { code: "service_unavailable" } });
    // The pool's wait, no less (the request waited for a connection), and not much more: slack for
    // a loaded machine, far short of "for good" and of the default's 10 s.
    expect(seconds).toBeGreaterThanOrEqual((POOL_WAIT_TEST_MS - 50) / 1000);
    expect(seconds).toBeLessThan(POOL_WAIT_TEST_MS / 1000 + 5);
    expect(seconds).toBeLessThan(POOL_WAIT_MS / 1000);

    await locker.query("commit");
    expect(await Promise.all(holders)).toEqual(["held", "held"]);
    expect((await balance(origin)).status).toBe(401);
  }, 60_000);
});
