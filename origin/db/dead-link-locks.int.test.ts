import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HEADER_EDGE_SECRET, HEADER_REGISTRATION, HEADER_REGISTRATION_IP } from "../../shared/constants.ts";
import { sleep } from "../../shared/sleep.ts";
import { createTestDatabase, databaseBehindProxy, type TestDatabase } from "../../testing/database.ts";
import { holdLock } from "../../testing/held-lock.ts";
import { send, type TestResponse } from "../../testing/http.ts";
import { waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import type { TcpProxy } from "../../testing/tcp-proxy.ts";
import { startWsRelay } from "../../testing/ws-relay.ts";
import { lockStatement } from "../outbox/submit.ts";
import { updateRegistrationPolicy } from "../registration/policy-repository.ts";
import {
  connectDatabase,
  type DatabaseHandle,
  TRANSACTION_IDLE_MS as DEFAULT_IDLE_MS,
  queryRows,
} from "./client.ts";
import { openPipelinedTransaction } from "./pipelined-transaction.ts";

// An origin's link to the database dies in the middle of a transaction that holds row locks, and
// neither end is told (a partition, a NAT or a balancer that forgot the flow, a frozen host): two
// origins on one real Postgres, one of them behind a TCP proxy the test stalls (its open links stop
// carrying anything, closes included, and stay open). Postgres keeps the dead origin's transaction
// until something ends it; the other origin's work on the same rows waits for it.
//
// The one thing made for the test: a trigger on registration_issued that makes an issuance's
// insert wait for an advisory lock the test holds, so the link is stalled while that transaction
// holds the registration policy row, and not somewhere near it (taken shared, so once the test lets
// go it holds up no other issuance). The bound is short here
// (TRANSACTION_IDLE_MS is 2 min) so the test does not wait it out; what it checks is the same.

const TRANSACTION_IDLE_MS = 2_000;
/**
 * The dead origin's statement bound: it gives up on its statement and drops the connection, which
 * Postgres never hears of. Longer than the idle bound and its slack below, so that what frees the
 * rows in time cannot be the dead origin's own giving up.
 */
const DEAD_ORIGIN_STATEMENT_WAIT_MS = 12_000;
const EDGE_SECRET = randomBytes(32).toString("hex");
const ENV = {
  AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
  AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
  AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
};
const INSERT_HOLD = 770_078;

/** Once the pool has dropped the links the proxy closed, its next statement answers. */
async function untilAnswers(database: DatabaseHandle): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await database.ping();
    } catch (error) {
      if (attempt >= 20) throw error;
      await sleep(100);
    }
  }
}

function register(origin: TestOrigin, ip: string): Promise<TestResponse> {
  return send(`${origin.base}/agent/v1/register`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      [HEADER_REGISTRATION]: "1",
      [HEADER_EDGE_SECRET]: EDGE_SECRET,
      [HEADER_REGISTRATION_IP]: ip,
    },
    body: "{}",
  });
}

/**
 * The dead link's test of the registration (an origin behind `proxy`) and the one of the money batch
 * (a pool of its own behind `batchProxy`) run at once: each waits out the dead side's statement bound
 * (DEAD_ORIGIN_STATEMENT_WAIT_MS) before it ends, on a link and rows of its own (the policy row, a
 * new sender's nonce row). docs/performance.md, "The test suite".
 */
describe("locks held by an origin whose database link dies silently (real Postgres, a stalled link)", () => {
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  let behindProxy: DatabaseHandle;
  let batchProxy: TcpProxy;
  let batchBehindProxy: DatabaseHandle;
  let cutOff: TestOrigin;
  let healthy: TestOrigin;
  const db = () => testDb.handle.db;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 10);
    await db().execute(
      sql.raw(`
      create function hold_issuance_insert() returns trigger language plpgsql as $$
      begin perform pg_advisory_xact_lock_shared(${INSERT_HOLD}); return null; end $$;
      create trigger hold_issuance_insert after insert on registration_issued
        for each row execute function hold_issuance_insert();`),
    );
    const deadSide = {
      statementWaitMs: DEAD_ORIGIN_STATEMENT_WAIT_MS,
      transactionIdleMs: TRANSACTION_IDLE_MS,
    };
    ({ proxy, database: behindProxy } = await databaseBehindProxy(testDb.url, deadSide));
    ({ proxy: batchProxy, database: batchBehindProxy } = await databaseBehindProxy(testDb.url, deadSide));
    cutOff = await startTestOrigin({ database: behindProxy, env: ENV, workers: [] });
    healthy = await startTestOrigin({ database: testDb.handle, env: ENV, workers: [] });
    await updateRegistrationPolicy(db(), { changes: { paused: false, keyReserve: 0 }, reason: "test" });
  });
  afterAll(async () => {
    proxy?.restore();
    batchProxy?.restore();
    await cutOff?.close();
    await healthy?.close();
    await behindProxy?.close();
    await batchBehindProxy?.close();
    await proxy?.close();
    await batchProxy?.close();
    await testDb?.drop();
  });

  it.concurrent("another origin's public registration waits for the policy row only as long as the idle bound, not for hours", async ({
    onTestFinished,
  }) => {
    // Mutation: connectDatabase without idle_in_transaction_session_timeout leaves the dead
    // origin's transaction, and the policy row's lock, in Postgres until TCP keepalive gives up
    // (over two hours); the healthy origin's registration waits for it, answered 503 at its
    // statement bound, and so does every one after it.
    const hold = await holdLock(db(), sql`select pg_advisory_xact_lock(${INSERT_HOLD})`, { onTestFinished });
    const lost = register(cutOff, "81.5.0.1").catch(() => undefined);
    await waitUntilBlockedBy(db(), {
      holder: hold.pid,
      statement: "insert into registration_issued",
      what: "the cut-off origin's issuance, holding the policy row",
    });
    // The link dies under the issuance: its insert ends, and its answer, and whatever the origin
    // sends after it (its commit, or the close when it gives up), go nowhere.
    proxy.stall();
    await hold.release();

    const started = performance.now();
    const response = await register(healthy, "81.5.0.2");
    const seconds = (performance.now() - started) / 1000;
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    // The bound, not a speed goal: slack for a loaded machine.
    expect(seconds).toBeLessThan(TRANSACTION_IDLE_MS / 1000 + 8);
    // The dead origin's transaction was rolled back: its identity was never made.
    const made = await queryRows<{ n: number }>(
      db(),
      sql`select count(*)::int as n from agent_identities where origin = 'public'`,
    );
    expect(made[0]!.n).toBe(1);
    await lost;
  }, 90_000);

  it.concurrent("another origin's money batch takes a sender's nonce row the dead origin's batch held", async () => {
    // Mutation: as above; the healthy origin's batch of that sender waits at the lock and fails
    // at its statement bound, and every transfer of that sender after it.
    await untilAnswers(batchBehindProxy);
    const sender = `0x${randomBytes(20).toString("hex")}`;
    const batch = await openPipelinedTransaction(batchBehindProxy.db);
    await batch.run(lockStatement, { senders: `{${sender}}` });
    batchProxy.stall();
    const ended = batch.rollback().catch(() => undefined);

    const started = performance.now();
    const next = await openPipelinedTransaction(db());
    const [locked] = await next
      .run(lockStatement, { senders: `{${sender}}` })
      .catch(async (error: unknown) => {
        await next.rollback().catch(() => {});
        throw error;
      });
    await next.commit();
    const seconds = (performance.now() - started) / 1000;
    expect(locked?.nonces).toEqual({ [sender]: "0" });
    expect(seconds).toBeLessThan(TRANSACTION_IDLE_MS / 1000 + 8);
    await ended;
  }, 90_000);

  it("bounds the pool's idle transactions at 2 min unless told otherwise, and keeps every connection's keepalive short", async () => {
    // The test database's own handle is made with the defaults.
    const settings = sql`select current_setting('idle_in_transaction_session_timeout') as idle,
      current_setting('tcp_keepalives_idle') as keepalive, inet_client_addr() is not null as tcp`;
    const [pooled] = await queryRows<{ idle: string; keepalive: string; tcp: boolean }>(db(), settings);
    expect(DEFAULT_IDLE_MS).toBe(120_000);
    expect(pooled?.idle).toBe("2min");
    // Postgres keeps keepalive settings for TCP connections only (0 on a Unix socket); the run's
    // Postgres, embedded or DATABASE_URL's, is reached over TCP.
    expect(pooled?.tcp).toBe(true);
    expect(pooled?.keepalive).toBe("60");
    // A connection of its own (a migration's, a sweep's lock) has the keepalive, not the idle bound.
    const [own] = await testDb.handle.unbounded((unbounded) =>
      queryRows<{ idle: string; keepalive: string; tcp: boolean }>(unbounded, settings),
    );
    expect(own?.keepalive).toBe("60");
    expect(own?.idle).not.toBe("2min");
  });

  it("sets the same bound and keepalive on a connection of the Neon driver", async () => {
    const relay = await startWsRelay();
    const neon = connectDatabase({
      url: testDb.url,
      driver: "neon",
      neonWsProxy: relay.address,
      maxConnections: 1,
      transactionIdleMs: 90_000,
    });
    try {
      const [row] = await queryRows<{ idle: string; keepalive: string }>(
        neon.db,
        sql`select current_setting('idle_in_transaction_session_timeout') as idle,
          current_setting('tcp_keepalives_idle') as keepalive`,
      );
      expect(row).toEqual({ idle: "90s", keepalive: "60" });
    } finally {
      await neon.close();
      await relay.close();
    }
  });
});
