import { eq } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevnet } from "../../devnet/index.ts";
import { SlidingWindowLimiter } from "../../shared/rate-limiter.ts";
import { sleep } from "../../shared/sleep.ts";
import { type CountingPassThrough, startCountingPassThrough } from "../../testing/counting-pass-through.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { send, type TestResponse } from "../../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { agentIdentities } from "../db/schema.ts";
import { InFlightLimiter } from "../http/in-flight.ts";
import { createGatewayLimiters, RPC_PREFETCH_IN_FLIGHT } from "./limits.ts";

type Devnet = Awaited<ReturnType<typeof startDevnet>>;

const BLOCK_NUMBER = JSON.stringify({ jsonrpc: "2.0", id: 7, method: "eth_blockNumber", params: [] });

/**
 * POST /rpc for a token that authenticated from this client lately: its upstream call is sent while
 * the token is read (origin/gateway/rpc-prefetch.ts), and nothing is answered before that read has
 * admitted the request. The token read is held up for real, by a transaction that locks the
 * tokens' table; a counting proxy in front of the devnet shows what reached the chain.
 */
describe("/rpc sent ahead of authentication (real database and devnet)", () => {
  let testDb: TestDatabase;
  let devnet: Devnet;
  let counter: CountingPassThrough;
  let origin: TestOrigin;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 5);
    devnet = await startDevnet({ port: 0 });
    counter = await startCountingPassThrough(devnet.url);
    origin = await startTestOrigin({
      database: testDb.handle,
      rpcUrl: counter.url,
      // Room for every call of the last test at once: its count is the prefetch's, not these slots'.
      limiters: { ...createGatewayLimiters(), rpcInFlight: new InFlightLimiter({ perKey: 16, total: 16 }) },
    });
  });

  afterAll(async () => {
    await origin?.close();
    await counter?.close();
    await devnet?.close();
    await testDb?.drop();
  });

  async function agent(): Promise<{ token: string; agentId: string }> {
    const issued = await provisionedIdentity(testDb.handle.db, {
      capabilities: ["read"],
      origin: "operator",
    });
    return { token: issued.token, agentId: issued.agentId };
  }
  const rpc = (token: string): Promise<TestResponse> =>
    send(`${origin.base}/agent/v1/rpc`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: BLOCK_NUMBER,
    });

  /** Holds every token read until `release`: a transaction with the tokens' table locked. */
  async function holdTokenReads(): Promise<{ release(): Promise<void> }> {
    const client = new pg.Client({ connectionString: testDb.url });
    await client.connect();
    await client.query("begin");
    await client.query("lock table agent_tokens in access exclusive mode");
    return {
      async release() {
        await client.query("commit");
        await client.end();
      },
    };
  }

  async function callsReach(count: number): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (counter.calls < count) {
      if (Date.now() > deadline) throw new Error(`${counter.calls} upstream calls, expected ${count}`);
      await sleep(10);
    }
  }

  /** Whether `promise` is still unsettled a moment from now. */
  async function pending(promise: Promise<unknown>): Promise<boolean> {
    const marker = Symbol("pending");
    return (await Promise.race([promise.then(() => null), sleep(100).then(() => marker)])) === marker;
  }

  it("sends a known token's call while its read waits, and answers only once the read admits it", async () => {
    const { token } = await agent();
    expect((await rpc(token)).status).toBe(200);
    const before = counter.calls;

    const held = await holdTokenReads();
    const answer = rpc(token);
    try {
      await callsReach(before + 1);
      expect(await pending(answer)).toBe(true);
    } finally {
      await held.release();
    }
    const response = await answer;
    expect(response.status).toBe(200);
    expect(response.body).toMatchObject({ jsonrpc: "2.0", id: 7, result: expect.stringMatching(/^0x/) });
    expect(counter.calls).toBe(before + 1);
  });

  it("drops the answer fetched for a token disabled since: 401, as without the prefetch", async () => {
    const { token, agentId } = await agent();
    expect((await rpc(token)).status).toBe(200);
    await testDb.handle.db
      .update(agentIdentities)
      .set({ enabled: false })
      .where(eq(agentIdentities.agentId, agentId));
    const before = counter.calls;

    const response = await rpc(token);
    expect(response.status).toBe(401);
    expect(response.body).toMatchObject({ error: { code: "agent_auth_failed" } });
    // The call was sent ahead, and its answer was not what the client got.
    expect(counter.calls).toBe(before + 1);
  });

  it("sends nothing ahead for a token not seen from this client, nor for a bad one", async () => {
    const { token } = await agent();
    const before = counter.calls;
    const held = await holdTokenReads();
    const answer = rpc(token);
    const forged = rpc(`${token.slice(0, -4)}0000`);
    try {
      expect(await pending(answer)).toBe(true);
      expect(counter.calls).toBe(before);
    } finally {
      await held.release();
    }
    expect((await answer).status).toBe(200);
    expect((await forged).status).toBe(401);
    expect(counter.calls).toBe(before + 1);
  });

  it(`sends at most ${RPC_PREFETCH_IN_FLIGHT.perToken} calls ahead per token; the rest wait for their read`, async () => {
    const { token } = await agent();
    expect((await rpc(token)).status).toBe(200);
    const before = counter.calls;
    const calls = RPC_PREFETCH_IN_FLIGHT.perToken + 2;

    const held = await holdTokenReads();
    // One at a time, so each reaches the prefetch before the next: the count is the slots'.
    const answers: Promise<TestResponse>[] = [];
    try {
      for (let i = 0; i < calls; i++) {
        answers.push(rpc(token));
        await sleep(50);
      }
      await callsReach(before + RPC_PREFETCH_IN_FLIGHT.perToken);
      await sleep(200);
      expect(counter.calls).toBe(before + RPC_PREFETCH_IN_FLIGHT.perToken);
    } finally {
      await held.release();
    }
    for (const response of await Promise.all(answers)) expect(response.status).toBe(200);
    expect(counter.calls).toBe(before + calls);
  });
});

/**
 * A token past its agent's request window is refused 429 by bearerAuth, after the prefetch has
 * already run: the refusal must not leave the chain answering every refused call for nothing.
 */
describe("/rpc sent ahead for an agent past its window (real database and devnet)", () => {
  const WINDOW = 3;
  let testDb: TestDatabase;
  let devnet: Devnet;
  let counter: CountingPassThrough;
  let origin: TestOrigin;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 2);
    devnet = await startDevnet({ port: 0 });
    counter = await startCountingPassThrough(devnet.url);
    origin = await startTestOrigin({
      database: testDb.handle,
      rpcUrl: counter.url,
      limiters: {
        ...createGatewayLimiters(),
        requestsPerAgent: new SlidingWindowLimiter({ limit: WINDOW, windowSeconds: 60 }),
      },
    });
  });

  afterAll(async () => {
    await origin?.close();
    await counter?.close();
    await devnet?.close();
    await testDb?.drop();
  });

  it("sends ahead no more than one call of a token its agent's window refuses: the rest reach no chain", async () => {
    const issued = await provisionedIdentity(testDb.handle.db, {
      capabilities: ["read"],
      origin: "operator",
    });
    const rpc = (): Promise<TestResponse> =>
      send(`${origin.base}/agent/v1/rpc`, {
        method: "POST",
        headers: { authorization: `Bearer ${issued.token}` },
        body: BLOCK_NUMBER,
      });
    for (let i = 0; i < WINDOW; i++) expect((await rpc()).status).toBe(200);
    const before = counter.calls;

    for (let i = 0; i < 20; i++) {
      const refused = await rpc();
      expect(refused.status).toBe(429);
      expect(refused.body).toMatchObject({ error: { code: "rate_limited" } });
    }
    // Settled: a call sent ahead is answered by the chain after the refusal has left.
    await sleep(300);
    expect(counter.calls - before).toBeLessThanOrEqual(1);
  });
});
