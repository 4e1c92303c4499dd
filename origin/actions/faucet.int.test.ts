import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import type { TestResponse } from "../../testing/http.ts";
import { backendPid, waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { agentCalls, isAccepted, newKey } from "../../testing/money-client.ts";
import { startTestOrigin } from "../../testing/origin.ts";
import { useMoneyStack, useStackOrigin } from "../../testing/stack.ts";
import { queryRows } from "../db/client.ts";
import { grantException, revokeException } from "../funding/exceptions.ts";

// POST /agent/v1/faucet and the funding gate (docs/api.md, "The funding gate") against the real stack.

describe("faucet and funding gate (real stack)", () => {
  // Payout 1 USDC, cooldown 60 s, 5 USDC a day per agent (the stack's defaults).
  const stack = useMoneyStack();
  let chain: ReturnType<typeof publicClientFor>;

  beforeAll(async () => {
    chain = publicClientFor(stack.devnet.url);
  });

  const payouts = async (agentId: string): Promise<number> => {
    const [row] = await queryRows<{ n: number }>(
      stack.db.handle.db,
      sql`select count(*)::int as n from agent_actions where agent_id = ${agentId} and kind = 'faucet' and signed_at is not null`,
    );
    return row!.n;
  };

  it("pays exactly the payout to the caller's wallet, then answers 429 faucet_cooldown", async () => {
    const agent = await stack.newAgent();
    const calls = agentCalls(stack.origin.base, agent.token);
    const treasuryBefore = await chain.getBalance({ address: stack.treasury });
    const response = await calls.faucet();
    expect(isAccepted(response)).toBe(true);
    const done = await calls.settled((response.body as ActionView).action_id);
    expect(done).toMatchObject({
      kind: "faucet",
      status: "confirmed",
      amount: "1000000",
      to: agent.wallet.toLowerCase(),
    });
    expect(await chain.getBalance({ address: agent.wallet })).toBe(1_000_000n * WEI_PER_UNIT);
    expect(treasuryBefore - (await chain.getBalance({ address: stack.treasury }))).toBe(
      1_000_000n * WEI_PER_UNIT + BigInt(done.fee_wei!),
    );

    const again = await calls.faucet();
    expect(again.status).toBe(429);
    const retryAfter = Number(again.headers["retry-after"]);
    expect(retryAfter).toBeGreaterThan(50);
    expect(retryAfter).toBeLessThanOrEqual(60);
    // Refused by the node's own cooldown under the treasury's lock, not left to the enclave's
    // sealed one (whose refusal gets the same code; its message names the sealed terms).
    expect(again.body).toMatchObject({
      error: {
        code: "faucet_cooldown",
        retry_after: retryAfter,
        message: "the faucet pays each agent once every 60 s",
      },
    });
    expect(await chain.getBalance({ address: agent.wallet })).toBe(1_000_000n * WEI_PER_UNIT);
  });

  it("pays once for 20 simultaneous requests with different keys from one agent", async () => {
    const agent = await stack.newAgent();
    const calls = agentCalls(stack.origin.base, agent.token);
    const responses = await Promise.all(Array.from({ length: 20 }, () => calls.faucet()));
    const statuses = responses.map((response) => response.status);
    expect(responses.filter(isAccepted)).toHaveLength(1);
    expect(statuses.filter((status) => status === 429)).toHaveLength(19);
    // Each refused by the node's own cooldown, which sees the payout signed under the treasury's
    // lock: none is left to the enclave's sealed cooldown.
    expect(
      new Set(
        responses
          .filter((response) => response.status === 429)
          .map((response) => (response.body as { error: { message: string } }).error.message),
      ),
    ).toEqual(new Set(["the faucet pays each agent once every 60 s"]));
    const paid = responses.find(isAccepted)!;
    expect((await calls.settled((paid.body as ActionView).action_id)).status).toBe("confirmed");
    expect(await payouts(agent.agentId)).toBe(1);
    expect(await chain.getBalance({ address: agent.wallet })).toBe(1_000_000n * WEI_PER_UNIT);
  });

  it("a repeat with the same idempotency key answers the same action and pays once", async () => {
    const agent = await stack.newAgent();
    const calls = agentCalls(stack.origin.base, agent.token);
    const key = newKey();
    const first = await calls.faucet(key);
    expect(isAccepted(first), JSON.stringify(first.body)).toBe(true);
    const actionId = (first.body as ActionView).action_id;
    expect((await calls.settled(actionId)).status).toBe("confirmed");
    // Within the cooldown: a new key would be 429; the same key is the same request, answered.
    const repeat = await calls.faucet(key);
    expect(repeat.status, JSON.stringify(repeat.body)).toBe(200);
    expect(repeat.body).toMatchObject({ action_id: actionId, kind: "faucet", status: "confirmed" });
    const concurrent = await Promise.all(Array.from({ length: 5 }, () => calls.faucet(key)));
    for (const answer of concurrent) expect((answer.body as ActionView).action_id).toBe(actionId);
    expect(await payouts(agent.agentId)).toBe(1);
    expect(await chain.getBalance({ address: agent.wallet })).toBe(1_000_000n * WEI_PER_UNIT);
  });

  describe("a repeat of a refused payout's key, on an origin whose clock the test moves", () => {
    // The repeat is answered later than the refusal by the origin's clock, without waiting for it.
    let aheadMs = 0;
    const moved = useStackOrigin("origin on a moved clock", stack, () => ({
      clock: { now: () => new Date(Date.now() + aheadMs) },
    }));
    /** The error object as sent (its keys in their order), the request id and `changes` put in place. */
    const errorText = (response: TestResponse, changes: Record<string, unknown>): string =>
      JSON.stringify({
        ...(response.body as { error: Record<string, unknown> }).error,
        request_id: "",
        ...changes,
      });

    it("answers 429 faucet_cooldown again, its retry_after and Retry-After counted down to now (the first answer otherwise, field for field), then 0 without the header once the wait is over", async () => {
      aheadMs = 0;
      const agent = await stack.newAgent();
      const calls = agentCalls(moved.base, agent.token);
      const paid = await calls.faucet();
      expect(isAccepted(paid), JSON.stringify(paid.body)).toBe(true);
      const key = newKey();
      const refused = await calls.faucet(key);
      expect(refused.status).toBe(429);
      const firstWait = Number(refused.headers["retry-after"]);
      expect(firstWait).toBeGreaterThan(50);
      expect(refused.body).toMatchObject({
        error: { code: "faucet_cooldown", retry_after: firstWait, action_id: expect.any(String) },
      });

      // 25 s later by the origin's clock. Mutation: a repeat without the stored fields has neither
      // figure; one that re-sends the stored figure answers firstWait.
      aheadMs = 25_000;
      const repeat = await calls.faucet(key);
      expect(repeat.status).toBe(429);
      const wait = Number(repeat.headers["retry-after"]);
      // Rounded up as the first answer was; the time the requests took may count one second more.
      expect(wait).toBeLessThanOrEqual(firstWait - 25);
      expect(wait).toBeGreaterThanOrEqual(firstWait - 26);
      expect(repeat.body).toMatchObject({ error: { retry_after: wait } });
      expect(errorText(repeat, { retry_after: wait })).toBe(errorText(refused, { retry_after: wait }));
      expect(repeat.headers["content-type"]).toBe(refused.headers["content-type"]);

      // Past the instant it named: nothing left to wait for.
      aheadMs = firstWait * 1000 + 1_000;
      const late = await calls.faucet(key);
      expect(late.status).toBe(429);
      expect(late.headers["retry-after"]).toBeUndefined();
      expect(errorText(late, {})).toBe(errorText(refused, { retry_after: 0 }));
      expect(await payouts(agent.agentId)).toBe(1);
    });
  });

  describe("the node's own payout terms (sealed with the treasury as the node has them)", () => {
    /** Seals the treasury's terms, starts an origin with the same ones, runs `body`, restores both. */
    const withTerms = async (
      terms: { payoutUnits: bigint; cooldownMs: number; dailyLimitUnits: bigint; budgetUnits?: bigint },
      body: (base: string) => Promise<void>,
    ): Promise<void> => {
      const seal = (change: Partial<typeof terms>) =>
        stack.signer.configureTreasury(
          {
            budgetUnits: 1_000_000_000n,
            payoutUnits: 1_000_000n,
            cooldownMs: 60_000,
            dailyLimitUnits: 5_000_000n,
            ...change,
          },
          stack.authorities.policy,
        );
      expect((await seal(terms)).ok).toBe(true);
      try {
        const origin = await stack.startOrigin({
          AGENT_FAUCET_PAYOUT_AMOUNT: String(terms.payoutUnits),
          AGENT_FAUCET_COOLDOWN_MS: String(terms.cooldownMs),
          AGENT_FAUCET_DAILY_LIMIT: String(terms.dailyLimitUnits),
        });
        await body(origin.base);
      } finally {
        expect((await seal({})).ok).toBe(true);
      }
    };

    it("AGENT_FAUCET_DAILY_LIMIT: past the agent's units for the UTC day, 429 faucet_daily_limit until the next day, nothing paid", async () => {
      await withTerms(
        { payoutUnits: 1_000_000n, cooldownMs: 0, dailyLimitUnits: 2_000_000n },
        async (base) => {
          const agent = await stack.newAgent();
          const calls = agentCalls(base, agent.token);
          for (let i = 0; i < 2; i++) {
            const paid = await calls.faucet();
            expect(isAccepted(paid), JSON.stringify(paid.body)).toBe(true);
            expect((await calls.settled((paid.body as ActionView).action_id)).status).toBe("confirmed");
          }
          const refused = await calls.faucet();
          expect(refused.status).toBe(429);
          const now = new Date();
          const nextDay = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
          const retryAfter = Number(refused.headers["retry-after"]);
          expect(Math.abs(retryAfter - (nextDay - now.getTime()) / 1000)).toBeLessThan(5);
          // Refused by this node's own limit, before anything reaches the enclave.
          expect(refused.body).toMatchObject({
            error: {
              code: "faucet_daily_limit",
              retry_after: retryAfter,
              message: "today's faucet payouts would exceed 2000000 units (the day is UTC)",
            },
          });
          expect(await payouts(agent.agentId)).toBe(2);
          expect(await chain.getBalance({ address: agent.wallet })).toBe(2_000_000n * WEI_PER_UNIT);
        },
      );
    });

    it("a payout first asked for on an origin still on the old payout, and signed on its retry by one on the resealed payout: the action's amount is what was paid", async () => {
      // An operator reseals a 2 USDC payout and restarts the origins one by one: the stack's own
      // origin still has 1 USDC, so the enclave refuses its payout's terms, nothing signed, and
      // the action stays requested; the agent's retry with its key reaches the restarted one.
      await withTerms(
        { payoutUnits: 2_000_000n, cooldownMs: 60_000, dailyLimitUnits: 5_000_000n },
        async (base) => {
          const agent = await stack.newAgent();
          const key = newKey();
          const first = await agentCalls(stack.origin.base, agent.token).faucet(key);
          expect(first.status, JSON.stringify(first.body)).toBe(503);
          const calls = agentCalls(base, agent.token);
          const paid = await calls.faucet(key);
          expect(isAccepted(paid), JSON.stringify(paid.body)).toBe(true);
          const done = await calls.settled((paid.body as ActionView).action_id);
          expect(done.status).toBe("confirmed");
          expect(await chain.getBalance({ address: agent.wallet })).toBe(2_000_000n * WEI_PER_UNIT);
          // The 202 and GET /actions/{id} say what moved, not the payout of the origin that first
          // recorded the request.
          expect((paid.body as ActionView).amount).toBe("2000000");
          expect(done.amount).toBe("2000000");
        },
      );
    });

    // A payout's check runs at the batch's time, read before the batch waited for the treasury's
    // lock, while a payout signed meanwhile is stamped with the database's time: the check can see
    // a payout signed after its own time. Mutation: the cooldown measured from the check's time
    // alone refuses the second payout 429 faucet_cooldown, "once every 0 s".
    const zeroCooldown = { payoutUnits: 1_000_000n, cooldownMs: 0, dailyLimitUnits: 20_000_000n };
    const zeroCooldownEnv = {
      AGENT_FAUCET_PAYOUT_AMOUNT: "1000000",
      AGENT_FAUCET_COOLDOWN_MS: "0",
      AGENT_FAUCET_DAILY_LIMIT: "20000000",
    };

    it("AGENT_FAUCET_COOLDOWN_MS=0: pays again at once, on an origin whose clock reads a little behind the database's", async () => {
      await withTerms(zeroCooldown, async () => {
        const behind = await startTestOrigin({
          database: stack.db.handle,
          rpcUrl: stack.devnet.url,
          env: { ...stack.originEnv, ...zeroCooldownEnv },
          clock: { now: () => new Date(Date.now() - 2_000) },
        });
        try {
          const agent = await stack.newAgent();
          const calls = agentCalls(behind.base, agent.token);
          for (let i = 0; i < 2; i++) {
            const paid = await calls.faucet();
            expect(isAccepted(paid), JSON.stringify(paid.body)).toBe(true);
            expect((await calls.settled((paid.body as ActionView).action_id)).status).toBe("confirmed");
          }
          expect(await payouts(agent.agentId)).toBe(2);
        } finally {
          await behind.close();
        }
      });
    });

    // The database stamps each payout (signed_at) and the cooldown is how long ago that was, by the
    // database's clock: an origin host whose clock is off the database host's neither shortens nor
    // lengthens it. Mutation: the stamp read against the origin's clock, five minutes behind,
    // refuses the payout again and again, each time with a Retry-After of the whole cooldown, for
    // five minutes.
    it("AGENT_FAUCET_COOLDOWN_MS=2000: on an origin whose clock is five minutes behind the database's, pays again once the Retry-After it named is over", async () => {
      await withTerms(
        { payoutUnits: 1_000_000n, cooldownMs: 2_000, dailyLimitUnits: 20_000_000n },
        async () => {
          const behind = await startTestOrigin({
            database: stack.db.handle,
            rpcUrl: stack.devnet.url,
            env: {
              ...stack.originEnv,
              AGENT_FAUCET_PAYOUT_AMOUNT: "1000000",
              AGENT_FAUCET_COOLDOWN_MS: "2000",
              AGENT_FAUCET_DAILY_LIMIT: "20000000",
            },
            clock: { now: () => new Date(Date.now() - 5 * 60_000) },
          });
          try {
            const agent = await stack.newAgent();
            const calls = agentCalls(behind.base, agent.token);
            const paid = await calls.faucet();
            expect(isAccepted(paid), JSON.stringify(paid.body)).toBe(true);
            const refused = await calls.faucet();
            expect(refused.status).toBe(429);
            expect(refused.body).toMatchObject({ error: { code: "faucet_cooldown" } });
            const retryAfter = Number(refused.headers["retry-after"]);
            expect(retryAfter).toBeGreaterThanOrEqual(1);
            expect(retryAfter).toBeLessThanOrEqual(2);
            // A client that follows Retry-After to the letter, give or take a network's moment.
            await sleep(retryAfter * 1000 + 100);
            const again = await calls.faucet();
            expect(isAccepted(again), JSON.stringify(again.body)).toBe(true);
            expect(await payouts(agent.agentId)).toBe(2);
          } finally {
            await behind.close();
          }
        },
      );
    });

    // The day's units are spent by a payout still inside its cooldown: the cooldown ends first, but
    // what refuses the agent then is the day. Answered faucet_cooldown with the cooldown's seconds,
    // a client that followed Retry-After was refused again, faucet_daily_limit, until midnight.
    it("AGENT_FAUCET_DAILY_LIMIT spent by a payout still in its cooldown: 429 faucet_daily_limit until the next UTC day, never a cooldown whose end is refused again", async () => {
      await withTerms(
        { payoutUnits: 1_000_000n, cooldownMs: 2_000, dailyLimitUnits: 2_000_000n },
        async (base) => {
          const agent = await stack.newAgent();
          const calls = agentCalls(base, agent.token);
          const first = await calls.faucet();
          expect(isAccepted(first), JSON.stringify(first.body)).toBe(true);
          await sleep(2_100);
          const second = await calls.faucet();
          expect(isAccepted(second), JSON.stringify(second.body)).toBe(true);
          // Inside the second payout's cooldown, with nothing of the day left.
          const refused = await calls.faucet();
          const now = new Date();
          const toMidnight =
            (Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1) - now.getTime()) / 1000;
          expect(refused.status).toBe(429);
          const retryAfter = Number(refused.headers["retry-after"]);
          expect(refused.body).toMatchObject({
            error: { code: "faucet_daily_limit", retry_after: retryAfter },
          });
          expect(Math.abs(retryAfter - toMidnight)).toBeLessThan(5);
          // Past the cooldown, the answer is the same: the day is what refuses.
          await sleep(2_100);
          const later = await calls.faucet();
          expect(later.status).toBe(429);
          expect(later.body).toMatchObject({ error: { code: "faucet_daily_limit" } });
          expect(await payouts(agent.agentId)).toBe(2);
        },
      );
    });

    // A payout's batch opens its transaction, then waits at the treasury's nonce row while another
    // batch signing from the treasury holds it (a loaded node, a second origin): the enclave signs,
    // and starts the agent's cooldown, only once the row is free. Mutation: the stamp taken at the
    // transaction's start (now()) dates the payout before that wait; the Retry-After then ends
    // before the enclave's cooldown does, and a client that follows it is refused again.
    it("AGENT_FAUCET_COOLDOWN_MS=2000: a payout whose signing waited at the treasury's lock is paid again once the Retry-After it named is over", async () => {
      const db = stack.db.handle.db;
      const treasury = stack.treasury.toLowerCase();
      await withTerms(
        { payoutUnits: 1_000_000n, cooldownMs: 2_000, dailyLimitUnits: 20_000_000n },
        async (base) => {
          const agent = await stack.newAgent();
          const calls = agentCalls(base, agent.token);
          await db.execute(
            sql`insert into sender_nonces (address, next_nonce) values (${treasury}, 0) on conflict do nothing`,
          );
          let first: Promise<TestResponse> | undefined;
          await db.transaction(async (tx) => {
            await tx.execute(sql`select 1 from sender_nonces where address = ${treasury} for update`);
            first = calls.faucet();
            // The payout's batch at the treasury's row (outbox/submit.ts lockStatement): a lock wait
            // of anything else (an origin's worker, another file's database) does not count.
            await waitUntilBlockedBy(db, {
              holder: await backendPid(tx),
              statement: "insert into sender_nonces",
              what: "the payout's batch waits at the treasury's nonce row",
              timeoutMs: 10_000,
            });
            // The window this test holds open: how long the batch waits after its transaction began.
            await sleep(1_500);
          });
          const paid = await first!;
          expect(isAccepted(paid), JSON.stringify(paid.body)).toBe(true);
          const refused = await calls.faucet();
          expect(refused.status).toBe(429);
          expect(refused.body).toMatchObject({ error: { code: "faucet_cooldown" } });
          // A client that follows Retry-After to the letter, give or take a network's moment.
          await sleep(Number(refused.headers["retry-after"]) * 1000 + 100);
          const again = await calls.faucet();
          expect(isAccepted(again), JSON.stringify(again.body)).toBe(true);
          expect(await payouts(agent.agentId)).toBe(2);
        },
      );
    });

    // The day a payout counts in is the origin's (and the enclave's, on the same host): the
    // database's stamp of it, taken back by how far the database's clock is from the origin's, is
    // weighed against the origin's midnight. Here the origin's clock reads three minutes past a
    // midnight (the test's clock, the one thing faked; the database's is the real one). Mutation:
    // the stamp weighed as is against the origin's midnight counts the payout the database
    // stamped seven minutes ago, signed at 23:56 by the origin's clock, in the new day, and
    // refuses that day's first payout 429 faucet_daily_limit until the next midnight.
    it("AGENT_FAUCET_DAILY_LIMIT: on an origin whose clock is off the database's, a payout signed before the origin's midnight is not counted after it, one signed after is", async () => {
      const terms = { payoutUnits: 1_000_000n, cooldownMs: 0, dailyLimitUnits: 1_000_000n };
      await withTerms(terms, async () => {
        const realNow = Date.now();
        const midnight = Date.UTC(
          new Date(realNow).getUTCFullYear(),
          new Date(realNow).getUTCMonth(),
          new Date(realNow).getUTCDate(),
        );
        const offsetMs = midnight + 3 * 60_000 - realNow;
        const skewed = await startTestOrigin({
          database: stack.db.handle,
          rpcUrl: stack.devnet.url,
          env: {
            ...stack.originEnv,
            AGENT_FAUCET_PAYOUT_AMOUNT: "1000000",
            AGENT_FAUCET_COOLDOWN_MS: "0",
            AGENT_FAUCET_DAILY_LIMIT: "1000000",
          },
          clock: { now: () => new Date(Date.now() + offsetMs) },
        });
        try {
          /** A payout of the agent the database stamped `minutesAgo` by its own clock. */
          const earlierPayout = (agent: { agentId: string; wallet: string }, minutesAgo: number) =>
            stack.db.handle.db.execute(
              sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, status,
                    amount_units, to_address, cost_units, signed_at)
                  values (${agent.agentId}, 'faucet', ${newKey()}, 'earlier', 'confirmed', 1000000,
                    ${agent.wallet.toLowerCase()}, 1000000,
                    now() - make_interval(mins => ${minutesAgo}))`,
            );
          // Signed at 23:56 by the origin's clock: yesterday's.
          const yesterdays = await stack.newAgent();
          await earlierPayout(yesterdays, 7);
          const paid = await agentCalls(skewed.base, yesterdays.token).faucet();
          expect(isAccepted(paid), JSON.stringify(paid.body)).toBe(true);
          expect(await payouts(yesterdays.agentId)).toBe(2);
          // Signed at 00:02 by the origin's clock: today's, and today's limit is one payout.
          const todays = await stack.newAgent();
          await earlierPayout(todays, 1);
          const refused = await agentCalls(skewed.base, todays.token).faucet();
          expect(refused.status).toBe(429);
          expect(refused.body).toMatchObject({
            error: {
              code: "faucet_daily_limit",
              message: "today's faucet payouts would exceed 1000000 units (the day is UTC)",
            },
          });
          expect(await payouts(todays.agentId)).toBe(1);
        } finally {
          await skewed.close();
        }
      });
    });

    it("AGENT_FAUCET_COOLDOWN_MS=0: 16 payouts to one agent at once, through two origins, are all paid", async () => {
      await withTerms(zeroCooldown, async (base) => {
        const other = await stack.startOrigin(zeroCooldownEnv);
        const agent = await stack.newAgent();
        const responses = await Promise.all(
          Array.from({ length: 16 }, (_, i) => agentCalls(i % 2 ? base : other.base, agent.token).faucet()),
        );
        const refused = responses.filter((response) => !isAccepted(response));
        expect(refused.map((response) => JSON.stringify(response.body))).toEqual([]);
        expect(await payouts(agent.agentId)).toBe(16);
      });
    });

    it("a treasury that cannot pay the payout: 403 funding_gate_closed treasury_low, nothing signed", async () => {
      // The treasury holds 1000 USDC (less what earlier payouts took); the payout is 2000.
      const payoutUnits = 2_000_000_000n;
      await withTerms(
        { payoutUnits, cooldownMs: 60_000, dailyLimitUnits: payoutUnits, budgetUnits: 10_000_000_000n },
        async (base) => {
          const agent = await stack.newAgent();
          const treasuryBefore = await chain.getBalance({ address: stack.treasury });
          expect(treasuryBefore).toBeLessThan(payoutUnits * WEI_PER_UNIT);
          const refused = await agentCalls(base, agent.token).faucet();
          expect(refused.status).toBe(403);
          expect(refused.body).toMatchObject({
            error: {
              code: "funding_gate_closed",
              reason: "treasury_low",
              message: "the faucet treasury cannot pay out now",
            },
          });
          expect(await payouts(agent.agentId)).toBe(0);
          expect(await chain.getBalance({ address: stack.treasury })).toBe(treasuryBefore);
        },
      );
    });
  });

  it("refuses a read-only token (403) and is 404 with the faucet switch off", async () => {
    const reader = await stack.newAgent({ capabilities: ["read", "transfer"] });
    const denied = await agentCalls(stack.origin.base, reader.token).faucet();
    expect(denied.status).toBe(403);
    expect(denied.body).toMatchObject({ error: { code: "agent_capability_required" } });
    const off = await stack.startOrigin({ AGENT_FAUCET_ENABLED: "false" });
    const agent = await stack.newAgent();
    const response = await agentCalls(off.base, agent.token).faucet();
    expect(response.status).toBe(404);
    expect(response.body).toMatchObject({ error: { code: "feature_disabled" } });
  });

  it("answers the enclave's own refusals by what refused them, once its sealed terms are tighter than the node's", async () => {
    // The policy authority changes the sealed treasury after the node started: the node's own
    // checks pass, the enclave refuses, and the agent gets the answer that names the bound.
    const agent = await stack.newAgent();
    const calls = agentCalls(stack.origin.base, agent.token);
    const seal = async (change: Record<string, bigint | number>): Promise<void> => {
      const sealed = await stack.signer.configureTreasury(
        {
          budgetUnits: 1_000_000_000n,
          payoutUnits: 1_000_000n,
          cooldownMs: 60_000,
          dailyLimitUnits: 5_000_000n,
          ...change,
        },
        stack.authorities.policy,
      );
      expect(sealed.ok).toBe(true);
    };
    const errorOf = (response: { status: number; body: unknown }) => ({
      status: response.status,
      ...(response.body as { error: Record<string, unknown> }).error,
    });
    try {
      await seal({ dailyLimitUnits: 500_000n });
      const daily = await calls.faucet();
      expect(errorOf(daily)).toMatchObject({
        status: 429,
        code: "faucet_daily_limit",
        retry_after: Number(daily.headers["retry-after"]),
      });
      await seal({ budgetUnits: 0n });
      expect(errorOf(await calls.faucet())).toMatchObject({
        status: 403,
        code: "funding_gate_closed",
        reason: "treasury_low",
      });
      await seal({ payoutUnits: 2_000_000n });
      expect(errorOf(await calls.faucet())).toMatchObject({ status: 503, code: "agent_signer_unavailable" });
      expect(await payouts(agent.agentId)).toBe(0);
    } finally {
      await seal({});
    }
    expect(isAccepted(await calls.faucet())).toBe(true);
  });

  describe("funding gate", () => {
    /** The faucet and a transfer of the agent are both refused 403 funding_gate_closed with `reason`. */
    const expectGateClosedForFaucetAndTransfer = async (token: string, reason: string): Promise<void> => {
      const calls = agentCalls(stack.origin.base, token);
      const faucet = await calls.faucet();
      expect(faucet.status).toBe(403);
      expect(faucet.body).toMatchObject({ error: { code: "funding_gate_closed", reason } });
      const transfer = await calls.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1",
      });
      expect(transfer.status).toBe(403);
      expect(transfer.body).toMatchObject({ error: { code: "funding_gate_closed", reason } });
    };

    it("zero_only refuses a wallet whose batch has no restore evidence, for the faucet and for transfers", async () => {
      const agent = await stack.newAgent({ drilled: false, units: 2_000_000n });
      await expectGateClosedForFaucetAndTransfer(agent.token, "no_restore_evidence");
      expect(await chain.getBalance({ address: agent.wallet })).toBe(2_000_000n * WEI_PER_UNIT);
    });

    it("evidence of a scratch-namespace drill (the live enclave restoring into itself) does not open the gate", async () => {
      // Such a drill proves nothing once the enclave is lost; only a restore into a new
      // enclave from the recovery key counts. A row as the earlier drills recorded it:
      const agent = await stack.newAgent({ drilled: false, units: 2_000_000n });
      await stack.db.handle.db.execute(
        sql`insert into restore_evidence (batch_id, method, scratch_namespace, key_count, public_keys_sha256)
            values (${agent.batchId}, 'scratch_namespace', 'scratch-0123456789abcdef', 1, ${"ab".repeat(32)})`,
      );
      const transfer = await agentCalls(stack.origin.base, agent.token).transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1",
      });
      expect(transfer.status).toBe(403);
      expect(transfer.body).toMatchObject({
        error: { code: "funding_gate_closed", reason: "no_restore_evidence" },
      });
      expect(await chain.getBalance({ address: agent.wallet })).toBe(2_000_000n * WEI_PER_UNIT);
    });

    it("an approved_non_zero exception allows up to its ceiling and nothing once it expires or is revoked; evidence lifts the gate", async () => {
      const agent = await stack.newAgent({ drilled: false });
      const calls = agentCalls(stack.origin.base, agent.token);
      const db = stack.db.handle.db;
      // Ceiling 1.5 USDC: one payout of 1 USDC fits, a second would not.
      const granted = await grantException(db, {
        wallet: agent.wallet,
        ceilingUnits: 1_500_000n,
        expiresAt: new Date(Date.now() + 3_600_000),
        reason: "pilot before the first drill",
      });
      expect(granted.ok).toBe(true);
      const first = await calls.faucet();
      expect(isAccepted(first)).toBe(true);
      expect((await calls.settled((first.body as ActionView).action_id)).status).toBe("confirmed");
      // The cooldown would refuse the next payout first; lift it by moving the payout back in time.
      await db.execute(
        sql`update agent_actions set signed_at = signed_at - interval '1 hour' where agent_id = ${agent.agentId}`,
      );
      const overCeiling = await calls.faucet();
      expect(overCeiling.status).toBe(403);
      expect(overCeiling.body).toMatchObject({
        error: { code: "funding_gate_closed", reason: "ceiling_exceeded" },
      });

      // Within the ceiling, a transfer out is allowed while the exception is active…
      const out = await calls.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "100",
      });
      expect(isAccepted(out)).toBe(true);
      await calls.settled((out.body as ActionView).action_id);
      // …and not once it has expired.
      await db.execute(
        sql`update funding_exceptions set expires_at = now() - interval '1 second' where wallet = ${agent.wallet.toLowerCase()}`,
      );
      const expired = await calls.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "100",
      });
      expect(expired.status).toBe(403);
      expect(expired.body).toMatchObject({
        error: { code: "funding_gate_closed", reason: "no_restore_evidence" },
      });

      const again = await grantException(db, {
        wallet: agent.wallet,
        ceilingUnits: 5_000_000n,
        expiresAt: new Date(Date.now() + 3_600_000),
        reason: "second look",
      });
      if (!again.ok) throw new Error(again.error.message);
      expect((await revokeException(db, { id: again.value.id, reason: "drill due" })).ok).toBe(true);
      const revoked = await calls.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "100",
      });
      expect(revoked.body).toMatchObject({
        error: { code: "funding_gate_closed", reason: "no_restore_evidence" },
      });

      // Restore evidence lifts the gate: no exception needed.
      const drilled = await stack.drill(agent.batchId);
      expect(drilled.ok).toBe(true);
      const lifted = await calls.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "100",
      });
      expect(isAccepted(lifted)).toBe(true);
    });

    it("a ceiling caps the wallet's balance after the move, not the amount moved (as docs/agents.md and funding --help say)", async () => {
      const agent = await stack.newAgent({ drilled: false, units: 2_000_000n });
      const calls = agentCalls(stack.origin.base, agent.token);
      const granted = await grantException(stack.db.handle.db, {
        wallet: agent.wallet,
        ceilingUnits: 1_000_000n,
        expiresAt: new Date(Date.now() + 3_600_000),
        reason: "ceiling semantics",
      });
      expect(granted.ok).toBe(true);
      // Holding 2 USDC under a 1 USDC ceiling: a small transfer would leave it above the ceiling…
      const small = await calls.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1000",
      });
      expect(small.status).toBe(403);
      expect(small.body).toMatchObject({
        error: { code: "funding_gate_closed", reason: "ceiling_exceeded" },
      });
      // …while one larger than the ceiling itself, which brings it below, goes.
      const to = newAccount().address;
      const large = await calls.transfer({ idempotency_key: newKey(), to, amount: "1500000" });
      expect(isAccepted(large), JSON.stringify(large.body)).toBe(true);
      expect((await calls.settled((large.body as ActionView).action_id)).status).toBe("confirmed");
      expect(await chain.getBalance({ address: to })).toBe(1_500_000n * WEI_PER_UNIT);
    });

    it("refuses a wallet whose key batch has no verified backup (batch_not_backed_up), for the faucet and for transfers", async () => {
      const agent = await stack.newAgent({ units: 2_000_000n });
      // The batch as the refill leaves it between writing the backup and verifying it.
      await stack.db.handle.db.execute(
        sql`update key_batches set status = 'backup_written' where batch_id = ${agent.batchId}`,
      );
      await expectGateClosedForFaucetAndTransfer(agent.token, "batch_not_backed_up");
      expect(await chain.getBalance({ address: agent.wallet })).toBe(2_000_000n * WEI_PER_UNIT);
    });

    it("refuses a wallet whose identity the enclave has not proven yet", async () => {
      const agent = await stack.newAgent({ verified: false, units: 1_000_000n });
      const response = await agentCalls(stack.origin.base, agent.token).transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1",
      });
      expect(response.status).toBe(403);
      expect(response.body).toMatchObject({
        error: { code: "funding_gate_closed", reason: "identity_not_verified" },
      });
    });
  });
});
