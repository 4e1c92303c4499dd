import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import type { TestResponse } from "../../testing/http.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import type { TestOrigin } from "../../testing/origin.ts";
import { type LieMode, type SentTransaction, startRpcRefusalProxy } from "../../testing/rpc-refusal-proxy.ts";
import { useFixture, useMoneyStack } from "../../testing/stack.ts";
import { envelope, fundedPayer, pay, paymentHeader } from "../../testing/x402-payer.ts";
import { queryRows } from "../db/client.ts";
import { X402_REASONS } from "../x402/reasons.ts";

// Nodes that lie the way real ones do (testing/rpc-refusal-proxy.ts lieOnce): the broadcast is
// passed on to the devnet, which takes and mines it, and then answered with an error:
//   - timeout: geth's own {"code": -32002, "message": "request timed out"};
//   - lagging: "nonce too low" (a load balancer that retried the call on a node that had mined it),
//     with the receipt then read from a node that lags (hidden for a few seconds).
// For a transfer, a faucet payout, an x402 settlement and a filler, on one origin and across two
// (the request to one, its repeat to the other, both behind the liar, both trackers following):
//   - the recipient receives exactly one amount;
//   - the agent is never told "nothing moved" while its transaction can still be mined;
//   - a repeat of the key answers what the chain decided.
//
// Mutations: recording a broadcast whose answer was not an acceptance as `failed` (the code before:
// every answer it did not recognise was a refusal) fails the lagging and filler cases; reading
// receipts after accepted answers only, as the code before also did, fails the timeout cases too
// (the settlement's record ends `failed` although its transaction was mined).

const X402_AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;
/** How long a lagging node hides the receipt: longer than a paid request waits for it here. */
const LAG_MS = 3_000;

type Setup = "one origin" | "two origins";
const CASES: Array<[LieMode, Setup]> = [
  ["timeout", "one origin"],
  ["timeout", "two origins"],
  ["lagging", "one origin"],
  ["lagging", "two origins"],
];

describe("a chain that lies about a broadcast it took (real processes, a lying pass-through)", () => {
  const stack = useMoneyStack(
    {
      x402: { amountUnits: X402_AMOUNT, payTo },
      // The stack's own origin reaches the devnet directly: its tracker is slowed right down.
      tracker: { periodMs: 3_600_000 },
      env: { AGENT_FAUCET_COOLDOWN_MS: "1000", AGENT_X402_RECEIPT_TIMEOUT_MS: "1500" },
    },
    { timeoutMs: 120_000 },
  );
  const proxy = useFixture(
    "lying pass-through",
    () => startRpcRefusalProxy(stack.devnet.url),
    (lying) => lying.close(),
    { timeoutMs: 120_000 },
  );
  let first: TestOrigin;
  let second: TestOrigin;
  let chain: ReturnType<typeof publicClientFor>;

  beforeAll(async () => {
    // Both behind the liar; the lag outlasts nothing they decide on (decideAfterMs is minutes).
    const tracker = { periodMs: 100, signedGraceMs: 500 };
    first = await stack.startOrigin({}, tracker, proxy.url);
    second = await stack.startOrigin({}, tracker, proxy.url);
    chain = publicClientFor(stack.devnet.url);
  }, 120_000);

  const origins = (setup: Setup): [TestOrigin, TestOrigin] =>
    setup === "one origin" ? [first, first] : [first, second];
  const paymentOf = (from: string) => (tx: SentTransaction) =>
    tx.from === from.toLowerCase() && tx.to !== from.toLowerCase();

  /**
   * Follows an action on both origins until it ends; every status seen on the way, and its end.
   * The agent must never see `failed` while its transaction can still be mined.
   */
  const follow = async (
    agent: StackAgent,
    actionId: string,
    [a, b]: [TestOrigin, TestOrigin],
  ): Promise<{ seen: Set<string>; view: ActionView }> => {
    const seen = new Set<string>();
    const deadline = Date.now() + 30_000;
    for (;;) {
      for (const origin of [a, b]) {
        const view = (await agentCalls(origin.base, agent.token).action(actionId)).body as ActionView;
        seen.add(view.status);
        if (["confirmed", "failed", "reverted"].includes(view.status)) return { seen, view };
      }
      if (Date.now() > deadline) throw new Error(`action ${actionId} still in flight`);
      await sleep(50);
    }
  };

  const expectRepeatConfirmed = (repeat: TestResponse, actionId: string): void => {
    expect(repeat.status, JSON.stringify(repeat.body)).toBe(200);
    expect(repeat.body).toMatchObject({ action_id: actionId, status: "confirmed" });
  };

  // The transfers' and the fillers' cases run at once (vitest runs adjacent concurrent tests
  // together), most of each the lagging node's LAG_MS: each lies about and refuses only its own
  // agent's broadcasts, and reads only its own agent's rows and recipient. The faucet's and the
  // settlements' cases run in turn after them: each of those lies about the first broadcast of a
  // sender they all share (the treasury, the settler). docs/performance.md, "The test suite".
  it.concurrent.each(CASES)(
    "a transfer answered %s, %s: paid once, confirmed, never failed",
    async (mode, setup) => {
      const [a, b] = origins(setup);
      const agent = await stack.newAgent({ units: 5_000_000n });
      const recipient = newAccount().address;
      const lied = proxy.lieOnce(paymentOf(agent.wallet), mode, LAG_MS);
      const key = newKey();
      const body = { idempotency_key: key, to: recipient, amount: "2000000" };
      const answer = await agentCalls(a.base, agent.token).transfer(body);
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      await lied;
      const actionId = (answer.body as ActionView).action_id;
      const { seen, view } = await follow(agent, actionId, [a, b]);
      expect(view.status).toBe("confirmed");
      expect(seen.has("failed")).toBe(false);
      expectRepeatConfirmed(await agentCalls(b.base, agent.token).transfer(body), actionId);
      expect(await chain.getBalance({ address: recipient })).toBe(2_000_000n * WEI_PER_UNIT);
    },
  );

  it.concurrent.each(CASES)(
    "a filler answered %s, %s: the transfer it replaced ends failed only once the filler is mined; nothing moved",
    async (mode, setup) => {
      const [a, b] = origins(setup);
      const agent = await stack.newAgent({ units: 5_000_000n });
      const wallet = agent.wallet.toLowerCase();
      const recipient = newAccount().address;
      // The transfer is refused by every node it reaches; its filler is taken and lied about.
      const refusing = proxy.refuseEvery(paymentOf(wallet));
      const lied = proxy.lieOnce((tx) => tx.from === wallet && tx.to === wallet, mode, LAG_MS);
      const key = newKey();
      const body = { idempotency_key: key, to: recipient, amount: "2000000" };
      try {
        const answer = await agentCalls(a.base, agent.token).transfer(body);
        expect(answer.status, JSON.stringify(answer.body)).toBe(202);
        await lied;
        const actionId = (answer.body as ActionView).action_id;
        const { view } = await follow(agent, actionId, [a, b]);
        expect(view).toMatchObject({ status: "failed", error_code: "broadcast_refused" });
        // "Nothing moved" only once proven: the filler is mined at the transfer's nonce.
        const rows = await queryRows<{ purpose: string; status: string }>(
          stack.db.handle.db,
          sql`select purpose, status from outgoing_transactions where sender = ${wallet} order by created_at`,
        );
        expect(rows).toEqual([
          { purpose: "transfer", status: "failed" },
          { purpose: "filler", status: "confirmed" },
        ]);
        expect(await chain.getTransactionCount({ address: agent.wallet })).toBe(1);
        const repeat = await agentCalls(b.base, agent.token).transfer(body);
        expect(repeat.status).toBe(422);
        expect(repeat.body).toMatchObject({ error: { code: "broadcast_refused", action_id: actionId } });
      } finally {
        refusing.stop();
      }
      expect(await chain.getBalance({ address: recipient })).toBe(0n);
    },
  );

  it.each(CASES)(
    "a faucet payout answered %s, %s: paid once, confirmed, never failed",
    async (mode, setup) => {
      const [a, b] = origins(setup);
      const agent = await stack.newAgent({});
      const lied = proxy.lieOnce(paymentOf(stack.treasury), mode, LAG_MS);
      const key = newKey();
      const answer = await agentCalls(a.base, agent.token).faucet(key);
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      await lied;
      const actionId = (answer.body as ActionView).action_id;
      const { seen, view } = await follow(agent, actionId, [a, b]);
      expect(view.status).toBe("confirmed");
      expect(seen.has("failed")).toBe(false);
      expectRepeatConfirmed(await agentCalls(b.base, agent.token).faucet(key), actionId);
      expect(await chain.getBalance({ address: agent.wallet })).toBe(1_000_000n * WEI_PER_UNIT);
    },
  );

  it.each(CASES)(
    "an x402 settlement answered %s, %s: paid once; every answer names the transaction; the same payment retried is paid",
    async (mode, setup) => {
      const [a, b] = origins(setup);
      const payer = await fundedPayer(stack.devnet.url);
      const payment = paymentHeader(await envelope(`${a.base}/x402/demo`, payer));
      const before = await chain.getBalance({ address: payTo });
      const lied = proxy.lieOnce(paymentOf(stack.settler!), mode, LAG_MS);
      const answers = [await pay(`${a.base}/x402/demo`, payment)];
      await lied;
      // A pending answer means "retry the same payment": the client does, on the other origin.
      while (answers.at(-1)!.status !== 200 && answers.length < 4) {
        expect(answers.at(-1)!.body.error).toBe(X402_REASONS.settlementPending);
        answers.push(await pay(`${b.base}/x402/demo`, payment));
      }
      const transactions = new Set(answers.map((answer) => answer.response?.transaction));
      expect(answers.at(-1)!.status).toBe(200);
      // One transaction, named by every answer, pending or paid.
      expect(transactions.size).toBe(1);
      expect([...transactions][0]).toMatch(/^0x[0-9a-f]{64}$/);
      if (mode === "lagging") expect(answers[0]!.body.error).toBe(X402_REASONS.settlementPending);
      // The settlement's record agrees with the chain, on both origins' database.
      await expect
        .poll(() =>
          queryRows<{ status: string }>(
            stack.db.handle.db,
            sql`select status from x402_settlements where payer = ${payer.address.toLowerCase()}`,
          ),
        )
        .toEqual([{ status: "settled" }]);
      expect((await chain.getBalance({ address: payTo })) - before).toBe(X402_AMOUNT * WEI_PER_UNIT);
      const payerBalance = await chain.getBalance({ address: payer.address });
      expect(payerBalance).toBe((1_000_000n - X402_AMOUNT) * WEI_PER_UNIT);
    },
  );
});
