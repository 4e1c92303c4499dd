import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, databaseBehindProxy, type TestDatabase } from "../../testing/database.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import type { TcpProxy } from "../../testing/tcp-proxy.ts";
import { type DatabaseHandle, POOL_WAIT_MS } from "./client.ts";
import { isDatabaseUnavailable } from "./unavailable.ts";

// The connection under a statement goes silent (a partition, a host that died after taking the
// query): the origin reaches the real Postgres through a TCP proxy whose open links the test stalls,
// new ones carried as before. The request must be told the database went away, and the pool must
// not keep the silent connection. The bound is short here (STATEMENT_WAIT_MS is 30 s) so the test
// does not wait it out; what it checks is the same.

const STATEMENT_WAIT_MS = 1_500;

function balance(origin: TestOrigin, signal?: AbortSignal): Promise<Response> {
  const token = `agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`;
  return fetch(`${origin.base}/agent/v1/balance`, {
    headers: { authorization: `Bearer ${token}` },
    ...(signal ? { signal } : {}),
  });
}

describe("a statement whose connection goes silent (real Postgres behind a stalled link)", () => {
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  let database: DatabaseHandle;
  let origin: TestOrigin;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    ({ proxy, database } = await databaseBehindProxy(testDb.url, {
      maxConnections: 1,
      statementWaitMs: STATEMENT_WAIT_MS,
    }));
    origin = await startTestOrigin({ database, workers: [] });
  });
  afterAll(async () => {
    proxy?.restore();
    await origin?.close();
    await database?.close();
    await proxy?.close();
    await testDb?.drop();
  });

  it("answers 503 service_unavailable at the statement's bound, and the next request is served on a new connection", async () => {
    // Mutation: connectDatabase without query_timeout leaves this request unanswered (the abort
    // below).
    expect((await balance(origin)).status).toBe(401);

    proxy.stall();
    const started = performance.now();
    const response = await balance(origin, AbortSignal.timeout(20_000)).catch((error: unknown) => {
      throw new Error(`no answer 20 s after the pool's one connection went silent: ${String(error)}`);
    });
    const seconds = (performance.now() - started) / 1000;
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ error: { code: "service_unavailable" } });
    expect(response.headers.get("retry-after")).toBe("1");
    // The bound, not a speed goal: slack for a loaded machine.
    expect(seconds).toBeLessThan(STATEMENT_WAIT_MS / 1000 + 5);

    // The silent connection is gone from the pool: the next request does not wait POOL_WAIT_MS for
    // it, and the database, still up behind new links, answers.
    const next = performance.now();
    expect((await balance(origin)).status).toBe(401);
    expect((performance.now() - next) / 1000).toBeLessThan(POOL_WAIT_MS / 1000);
  }, 60_000);

  it("fails the statement as the database being unavailable, which every route answers 503", async () => {
    // Mutation: without "query read timeout" in db/unavailable.ts, app.ts answers it 500
    // internal_error (the token lookup above answers 503 whatever its error).
    expect(await database.db.execute(sql`select 1 as up`)).toMatchObject({ rows: [{ up: 1 }] });
    proxy.stall();
    const error = await database.db.execute(sql`select 1 as up`).then(
      () => undefined,
      (failure: unknown) => failure,
    );
    expect(error, "the statement answered through a stalled link").toBeInstanceOf(Error);
    expect(isDatabaseUnavailable(error), String(error)).toBe(true);
    expect(await database.db.execute(sql`select 2 as up`)).toMatchObject({ rows: [{ up: 2 }] });
  }, 30_000);
});
