import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { claimActions, requestHash } from "../agent-actions/repository.ts";
import { queryRows } from "../db/client.ts";
import { grantException } from "../funding/exceptions.ts";
import type { AuthenticatedAgent } from "../http/env.ts";
import { createMoneyExecutor } from "./execute.ts";
import { faucetOperation } from "./faucet.ts";
import type { ExecuteOutcome, MoneyExecutor, MoneyOperation } from "./operation.ts";
import { transferOperation } from "./transfers.ts";

// The executor's batches, against the real stack: operations handed over in one turn of the event
// loop share a batch, and each must see the ones before it in that batch as if they had committed.

describe("money executor batches (real stack)", () => {
  // Per-transaction 10 USDC, daily 50 USDC, faucet 1 USDC a minute (the stack's defaults).
  const stack = useMoneyStack();
  let executor: MoneyExecutor;

  beforeAll(async () => {
    const deps = stack.origin.deps;
    executor = createMoneyExecutor({ clock: deps.clock, outbox: deps.money!.outbox });
  });

  const asAgent = (agent: StackAgent): AuthenticatedAgent => ({
    agentId: agent.agentId,
    assignedWallet: agent.wallet,
    keyRef: agent.keyRef,
    capabilities: ["read", "faucet", "transfer"],
    hasPolicy: false,
  });

  /** Claims one action per operation, then hands them all to the executor in one turn. */
  async function inOneBatch(
    kind: "transfer" | "faucet",
    agents: StackAgent[],
    build: (actionId: string, agent: StackAgent) => MoneyOperation,
  ): Promise<ExecuteOutcome[]> {
    const claims = await claimActions(
      stack.db.handle.db,
      agents.map((agent, index) => ({
        agentId: agent.agentId,
        kind,
        idempotencyKey: `batch-${Date.now()}-${index}`,
        requestHash: requestHash(kind, { n: String(index) }),
        amountUnits: null,
        toAddress: null,
      })),
    );
    const operations = claims.map((claim, index) => build(claim.action.actionId, agents[index]!));
    return Promise.all(operations.map((operation) => executor.execute(operation)));
  }

  const chain = () => publicClientFor(stack.devnet.url);
  const noncesOf = async (agent: StackAgent): Promise<string[]> =>
    (
      await queryRows<{ nonce: string }>(
        stack.db.handle.db,
        sql`select nonce::text from outgoing_transactions where sender = ${agent.wallet.toLowerCase()}
            and status <> 'failed' order by nonce`,
      )
    ).map((row) => row.nonce);

  const services = () => ({
    config: stack.origin.deps.config,
    clock: stack.origin.deps.clock,
  });

  it("counts earlier transfers of the same batch against the daily limit: exactly five of six fit", async () => {
    const agent = await stack.newAgent({ units: 100_000_000n });
    const to = newAccount().address.toLowerCase();
    // Six of 9 USDC each: five (plus their fees) fit the 50 USDC day, the sixth does not.
    const outcomes = await inOneBatch("transfer", Array(6).fill(agent), (actionId) =>
      transferOperation(services(), { actionId, agent: asAgent(agent), to, amount: 9_000_000n }),
    );
    expect(outcomes.filter((outcome) => outcome.kind === "signed")).toHaveLength(5);
    const refused = outcomes.filter((outcome) => outcome.kind === "refused");
    expect(refused).toHaveLength(1);
    // The gateway's own count refused it, not the enclave's re-check.
    expect(refused[0]).toMatchObject({
      refusal: {
        code: "limit_exceeded",
        fields: { limit: "daily" },
        message: expect.stringContaining("over what remains"),
      },
    });
    const nonces = await queryRows<{ nonce: string }>(
      stack.db.handle.db,
      sql`select nonce::text from outgoing_transactions where sender = ${agent.wallet.toLowerCase()} order by nonce`,
    );
    expect(nonces.map((row) => row.nonce)).toEqual(["0", "1", "2", "3", "4"]);
  });

  it("counts an earlier payout of the same batch against the cooldown: one of two is paid", async () => {
    const agent = await stack.newAgent();
    const treasury = stack.origin.deps.money!.treasury!;
    const outcomes = await inOneBatch("faucet", [agent, agent], (actionId) =>
      faucetOperation(services(), { actionId, agent: asAgent(agent), treasury }),
    );
    expect(outcomes.map((outcome) => outcome.kind).sort()).toEqual(["refused", "signed"]);
    expect(outcomes.find((outcome) => outcome.kind === "refused")).toMatchObject({
      refusal: { code: "faucet_cooldown" },
    });
  });

  it("keeps a refusal to its own operation: the same sender's operations around it are signed at contiguous nonces", async () => {
    // Mutation: a refused operation taking its nonce (nonce++ whatever signOne answers) leaves a
    // hole at nonce 1: the signed ones are then at 0 and 2, and the nonces below differ.
    const rich = await stack.newAgent({ units: 20_000_000n });
    const other = await stack.newAgent({ units: 10_000_000n });
    const to = newAccount().address.toLowerCase();
    // The middle one is over the 10 USDC per-transaction limit, with the balance to pay it.
    const amounts = [1_000n, 10_000_001n, 2_000n];
    const outcomes = await inOneBatch("transfer", [rich, rich, rich, other], (actionId, agent) => {
      const amount = agent === other ? 1_000n : amounts.shift()!;
      return transferOperation(services(), { actionId, agent: asAgent(agent), to, amount });
    });
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(["signed", "refused", "signed", "signed"]);
    expect(outcomes[1]).toMatchObject({
      refusal: { code: "limit_exceeded", fields: { limit: "per_transaction" } },
    });
    expect(await noncesOf(rich)).toEqual(["0", "1"]);
    // A good transfer from the same wallet after the refusal takes the next nonce and confirms.
    const [next] = await inOneBatch("transfer", [rich], (actionId, agent) =>
      transferOperation(services(), { actionId, agent: asAgent(agent), to, amount: 3_000n }),
    );
    expect(next!.kind).toBe("signed");
    expect(await noncesOf(rich)).toEqual(["0", "1", "2"]);
    await expect
      .poll(() => chain().getTransactionCount({ address: rich.wallet }), { timeout: 20_000 })
      .toBe(3);
  });

  it("runs two batches at once without interleaving a sender's nonces: each sender's are contiguous, each batch's in the order sent", async () => {
    // Two batches are in flight at once (execute.ts MAX_IN_FLIGHT); which takes a shared sender's
    // nonce row first is the scheduler's choice (on a loaded machine the second one sent can), so
    // the test holds the guarantee, not an order: each sender's nonces distinct and contiguous
    // from 0 across both batches, each batch's own in the order it was sent, and the batch that
    // waited for the shared sender's lock taking all of its nonces after the other's. Mutation: a
    // batch not locking its senders' nonce rows (outbox/submit.ts, the lock statement's `senders`)
    // lets the second read the next nonce the first is about to take: it signs nonce 0 again, and
    // its store fails on the live-nonce rule, so its operations are not signed.
    const shared = await stack.newAgent({ units: 10_000_000n });
    const others: StackAgent[] = [];
    for (let n = 0; n < 3; n++) others.push(await stack.newAgent({ units: 1_000_000n }));
    const to = newAccount().address.toLowerCase();
    const batches = [
      [shared, others[0]!, shared],
      [shared, others[1]!, others[2]!, shared],
    ];
    const sent = batches.flatMap((agents, batch) => agents.map((agent) => ({ agent, batch })));
    const claims = await claimActions(
      stack.db.handle.db,
      sent.map(({ agent }, index) => ({
        agentId: agent.agentId,
        kind: "transfer" as const,
        idempotencyKey: `in-flight-${Date.now()}-${index}`,
        requestHash: requestHash("transfer", { n: String(index) }),
        amountUnits: null,
        toAddress: null,
      })),
    );
    const execute = (index: number): Promise<ExecuteOutcome> =>
      executor.execute(
        transferOperation(services(), {
          actionId: claims[index]!.action.actionId,
          agent: asAgent(sent[index]!.agent),
          to,
          amount: 1_000n + BigInt(index),
        }),
      );
    const firstCount = batches[0]!.length;
    let firstDone = false;
    const firstOutcomes = Promise.all(batches[0]!.map((_, index) => execute(index)));
    void firstOutcomes.finally(() => {
      firstDone = true;
    });
    // The first batch starts on the next turn of the event loop; the second opens after it, while
    // the first is still in flight.
    await new Promise((resolve) => setImmediate(resolve));
    const secondOutcomes = Promise.all(batches[1]!.map((_, index) => execute(firstCount + index)));
    expect(firstDone).toBe(false);
    const outcomes = [...(await firstOutcomes), ...(await secondOutcomes)];
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(Array(sent.length).fill("signed"));
    const nonceOf = async (outcome: ExecuteOutcome): Promise<number> => {
      if (outcome.kind !== "signed") throw new Error(`not signed: ${outcome.kind}`);
      const [row] = await queryRows<{ nonce: string }>(
        stack.db.handle.db,
        sql`select nonce::text from outgoing_transactions where tx_hash = ${outcome.action.txHash}`,
      );
      return Number(row!.nonce);
    };
    const nonces = await Promise.all(outcomes.map((outcome) => nonceOf(outcome)));
    for (const agent of [shared, ...others]) {
      // Per batch, this sender's nonces in the order its operations were sent.
      const perBatch = batches.map((_, batch) =>
        sent.flatMap((entry, index) =>
          entry.agent === agent && entry.batch === batch ? [nonces[index]!] : [],
        ),
      );
      const all = perBatch.flat();
      // Distinct and contiguous from 0 across both batches: nothing signed twice, no gap.
      expect([...all].sort((a, b) => a - b)).toEqual(all.map((_, n) => n));
      for (const own of perBatch) expect(own).toEqual([...own].sort((a, b) => a - b));
      // Not interleaved: one batch's nonces all below the other's.
      const held = perBatch.filter((own) => own.length > 0);
      if (held.length === 2) {
        const [a, b] = held as [number[], number[]];
        expect(Math.max(...a) < Math.min(...b) || Math.max(...b) < Math.min(...a)).toBe(true);
      }
      // Nothing else was stored for the sender, and the chain mines every one.
      expect(await noncesOf(agent)).toEqual(all.map((_, n) => String(n)));
      await expect
        .poll(() => chain().getTransactionCount({ address: agent.wallet }), { timeout: 20_000 })
        .toBe(all.length);
    }
  });

  it("counts money in flight: of two 0.6 USDC transfers from a 1 USDC wallet, one is signed, the other refused insufficient_funds", async () => {
    // Mutation: not counting what an earlier operation of the batch holds (facts.count leaving
    // the in-flight total alone) signs both; the chain would refuse the second.
    const agent = await stack.newAgent({ units: 1_000_000n });
    const to = newAccount().address.toLowerCase();
    const outcomes = await inOneBatch("transfer", [agent, agent], (actionId) =>
      transferOperation(services(), { actionId, agent: asAgent(agent), to, amount: 600_000n }),
    );
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(["signed", "refused"]);
    expect(outcomes[1]).toMatchObject({ refusal: { code: "insufficient_funds" } });
    // Again in a batch of its own: the first one's cost is in flight or already out of the balance.
    const [again] = await inOneBatch("transfer", [agent], (actionId) =>
      transferOperation(services(), { actionId, agent: asAgent(agent), to, amount: 600_000n }),
    );
    expect(again).toMatchObject({ kind: "refused", refusal: { code: "insufficient_funds" } });
    expect(await noncesOf(agent)).toEqual(["0"]);
  });

  it("signs an action once when a duplicate arrives after it was signed: the late one is busy", async () => {
    // Mutation: the lock taking any action, not only a `requested` one, signs it a second time.
    const agent = await stack.newAgent({ units: 1_000_000n });
    const to = newAccount().address.toLowerCase();
    const [claim] = await claimActions(stack.db.handle.db, [
      {
        agentId: agent.agentId,
        kind: "transfer",
        idempotencyKey: `late-${Date.now()}`,
        requestHash: requestHash("transfer", { n: "late" }),
        amountUnits: null,
        toAddress: null,
      },
    ]);
    const operation = () =>
      transferOperation(services(), {
        actionId: claim!.action.actionId,
        agent: asAgent(agent),
        to,
        amount: 1_000n,
      });
    expect((await executor.execute(operation())).kind).toBe("signed");
    expect((await executor.execute(operation())).kind).toBe("busy");
    expect(await noncesOf(agent)).toEqual(["0"]);
  });

  it("holds a wallet before its restore drill to its ceiling after the move, counting what its earlier transfers of the batch take", async () => {
    // 2 USDC under a 1 USDC ceiling (an approved exception, no restore evidence yet): 1.5 USDC out
    // brings it under the ceiling; 0.1 USDC more, after that, keeps it under. The first alone would
    // not have (2 − 0.1 is over the ceiling), so the second is allowed only through the first.
    // Mutation: the gate reading the balance without what is in flight refuses the second.
    const agent = await stack.newAgent({ drilled: false, units: 2_000_000n });
    const granted = await grantException(stack.db.handle.db, {
      wallet: agent.wallet,
      ceilingUnits: 1_000_000n,
      expiresAt: new Date(Date.now() + 3_600_000),
      reason: "ceiling with money in flight",
    });
    expect(granted.ok).toBe(true);
    const to = newAccount().address.toLowerCase();
    const amounts = [1_500_000n, 100_000n];
    const outcomes = await inOneBatch("transfer", [agent, agent], (actionId) =>
      transferOperation(services(), { actionId, agent: asAgent(agent), to, amount: amounts.shift()! }),
    );
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(["signed", "signed"]);
    // Alone, from the full balance, the small one is over the ceiling.
    const other = await stack.newAgent({ drilled: false, units: 2_000_000n });
    await grantException(stack.db.handle.db, {
      wallet: other.wallet,
      ceilingUnits: 1_000_000n,
      expiresAt: new Date(Date.now() + 3_600_000),
      reason: "ceiling alone",
    });
    const [alone] = await inOneBatch("transfer", [other], (actionId) =>
      transferOperation(services(), { actionId, agent: asAgent(other), to, amount: 100_000n }),
    );
    expect(alone).toMatchObject({
      kind: "refused",
      refusal: { code: "funding_gate_closed", fields: { reason: "ceiling_exceeded" } },
    });
  });

  it("counts what the batch's earlier payments bring a wallet under a ceiling, whoever pays them: of two that fit it alone, one is signed", async () => {
    // Two agents each send 0.6 USDC in one batch to a wallet under a 1 USDC ceiling (an approved
    // exception, no restore evidence). Each sender's first operation is admitted before either is
    // signed (senders are signed at once), so the second is checked before the first's signature.
    // Mutation: counting what a payment brings its recipient once signed (facts.count) instead of
    // once admitted (facts.admit), or not at all, signs both.
    const [a, b] = await stack.newAgents(2, { units: 2_000_000n });
    const recipient = await stack.newAgent({ drilled: false });
    const granted = await grantException(stack.db.handle.db, {
      wallet: recipient.wallet,
      ceilingUnits: 1_000_000n,
      expiresAt: new Date(Date.now() + 3_600_000),
      reason: "two payers in one batch",
    });
    expect(granted.ok).toBe(true);
    const to = recipient.wallet.toLowerCase();
    const outcomes = await inOneBatch("transfer", [a!, b!], (actionId, agent) =>
      transferOperation(services(), { actionId, agent: asAgent(agent), to, amount: 600_000n }),
    );
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(["signed", "refused"]);
    expect(outcomes[1]).toMatchObject({
      refusal: { code: "funding_gate_closed", fields: { reason: "ceiling_exceeded" } },
    });
  });

  describe("the faucet's day and cooldown (seeded payout history, moved back in the database)", () => {
    const DAY_MS = 86_400_000;
    /** Payouts of `agent` recorded as signed at `at` (history the enclave never saw). */
    const seedPayouts = async (agent: StackAgent, times: Date[]) => {
      const claims = await claimActions(
        stack.db.handle.db,
        times.map((_, index) => ({
          agentId: agent.agentId,
          kind: "faucet" as const,
          idempotencyKey: `seed-${Date.now()}-${index}`,
          requestHash: requestHash("faucet", { n: String(index) }),
          amountUnits: 1_000_000n,
          toAddress: agent.wallet.toLowerCase(),
        })),
      );
      for (const [index, claim] of claims.entries()) {
        await stack.db.handle.db.execute(sql`update agent_actions set status = 'confirmed',
            signed_at = ${times[index]!.toISOString()}::timestamptz where action_id = ${claim.action.actionId}`);
      }
    };
    /**
     * The agent's latest payout moved `ms` back, by the database's clock, which stamps payouts and
     * says how long ago they were (the node's own check then reads it as that much older; the
     * enclave's record of it, on its own clock, stays where it was).
     */
    const movePayoutBack = (agent: StackAgent, ms: number) =>
      stack.db.handle.db.execute(sql`update agent_actions set signed_at = signed_at - make_interval(secs => ${ms / 1000})
          where action_id = (select action_id from agent_actions where agent_id = ${agent.agentId}
            and kind = 'faucet' and signed_at is not null order by signed_at desc limit 1)`);
    const payout = async (agent: StackAgent) => {
      const treasury = stack.origin.deps.money!.treasury!;
      const [claim] = await claimActions(stack.db.handle.db, [
        {
          agentId: agent.agentId,
          kind: "faucet",
          idempotencyKey: `payout-${Date.now()}-${Math.random()}`,
          requestHash: requestHash("faucet", {}),
          amountUnits: 1_000_000n,
          toAddress: agent.wallet.toLowerCase(),
        },
      ]);
      return executor.execute(
        faucetOperation(services(), { actionId: claim!.action.actionId, agent: asAgent(agent), treasury }),
      );
    };
    /** Today's UTC midnight plus `ms`, or `ms` before now if that is still yesterday. */
    const earlierToday = (ms: number): Date => {
      const now = Date.now();
      const midnight = now - (now % DAY_MS);
      return new Date(Math.max(midnight + 1, now - ms));
    };

    it("pays the 5th payout of a UTC day and answers the 6th 429 faucet_daily_limit", async () => {
      // Mutation: dropping the node's daily check lets the 6th reach the enclave, whose own
      // cooldown (on its clock) refuses it as faucet_cooldown instead.
      const agent = await stack.newAgent();
      await seedPayouts(
        agent,
        [4, 3, 2].map((minutes) => earlierToday(minutes * 60_000)).concat(earlierToday(61_000)),
      );
      const fifth = await payout(agent);
      expect(fifth.kind, fifth.kind === "signed" ? "" : JSON.stringify(fifth)).toBe("signed");
      // As a minute and more later: the cooldown is over, the day's 5 USDC are not.
      await movePayoutBack(agent, 61_000);
      const sixth = await payout(agent);
      expect(sixth).toMatchObject({
        kind: "refused",
        refusal: { code: "faucet_daily_limit", message: expect.stringMatching(/^today's faucet payouts/) },
      });
    });

    it("does not count yesterday's payouts against today", async () => {
      // Mutation: counting every payout, not those signed since today's UTC midnight, refuses this.
      const agent = await stack.newAgent();
      const now = Date.now();
      const yesterday = now - (now % DAY_MS) - 3_600_000;
      await seedPayouts(
        agent,
        [0, 1, 2, 3, 4].map((n) => new Date(yesterday - n * 120_000)),
      );
      expect((await payout(agent)).kind).toBe("signed");
    });

    it("still answers 429 faucet_cooldown 45 s after a payout, with the 15 s left to wait", async () => {
      // Mutation: a shorter cooldown in the node (half of it, or read as seconds) lets this one
      // reach the enclave, whose refusal names the whole sealed cooldown (60 s), not the 15 s left.
      const agent = await stack.newAgent();
      expect((await payout(agent)).kind).toBe("signed");
      await movePayoutBack(agent, 45_000);
      const later = await payout(agent);
      expect(later).toMatchObject({
        kind: "refused",
        refusal: {
          code: "faucet_cooldown",
          message: expect.stringMatching(/^the faucet pays each agent once every 60 s/),
          fields: { retry_after: 15 },
        },
      });
    });
  });
});
