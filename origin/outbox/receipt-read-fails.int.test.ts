import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { beforeAll, describe, type ExpectStatic, it } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import { useRpcCutProxy } from "../../testing/fault-scenario.ts";
import { mineForeignTransferAtNonceZero } from "../../testing/foreign-transfer.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import type { MoneyStack } from "../../testing/money-stack.ts";
import type { TestOrigin } from "../../testing/origin.ts";
import type { RpcCutProxy } from "../../testing/rpc-cut-proxy.ts";
import { startRpcRefusalProxy } from "../../testing/rpc-refusal-proxy.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { envelope, fundedPayer, pay, paymentHeader } from "../../testing/x402-payer.ts";
import { authorizationUsedCount } from "../../testing/x402-settlements.ts";
import { queryRows } from "../db/client.ts";
import { X402_REASONS } from "../x402/reasons.ts";

// A node that fails the receipt reads but answers the nonce reads (a hosted node's limit on the
// costlier method, a node whose receipt index is rebuilding): the service's transfer is mined, its
// sender's nonce has passed it, and the tracker cannot read its receipt. A failed read says nothing
// of the transaction: it must stay in flight however long the reads fail, never end `failed` as if
// a transaction the service did not sign had taken its nonce (decide.ts), and confirm (or settle,
// for an x402 settlement) once the receipts are read again. The failure comes from a FAKE: a JSON-RPC pass-through to the real
// devnet that answers 503 to requests calling eth_getTransactionReceipt while they are withheld
// (testing/rpc-cut-proxy.ts); everything else, the broadcast and the nonce reads included, goes
// through to the devnet, which mines the transfer on arrival.

const DECIDE_AFTER_MS = 1_500;
const CHAINED_DECIDE_AFTER_MS = 3_000;
const X402_AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

/**
 * Adjacent concurrent blocks run at once. The receipts are withheld for a whole stack (every
 * origin on a database tracks all its transactions), so each block has a stack, a pass-through and
 * an origin of its own, and nothing one test withholds, counts or marks is another's.
 */
const BESIDE = { concurrent: true } as const;

type Withholding = { stack: MoneyStack; proxy: RpcCutProxy; origin(): TestOrigin };

/** A stack for the describe block it is called in, and an origin reaching its devnet through a pass-through that withholds receipts. */
function useWithholdingStack(): Withholding {
  // The stack's own origin reaches the devnet directly: its tracker is slowed right down.
  const stack = useMoneyStack(
    {
      x402: { amountUnits: X402_AMOUNT, payTo },
      tracker: { periodMs: 3_600_000 },
      env: { AGENT_X402_RECEIPT_TIMEOUT_MS: "1000" },
    },
    { timeoutMs: 120_000 },
  );
  const proxy = useRpcCutProxy(() => stack.devnet.url);
  let origin: TestOrigin | undefined;
  beforeAll(async () => {
    origin = await stack.startOrigin(
      {},
      { periodMs: 100, signedGraceMs: 500, decideAfterMs: DECIDE_AFTER_MS },
      proxy.url,
    );
  }, 120_000);
  return {
    stack,
    proxy,
    origin: () => {
      if (!origin) throw new Error("the origin is used before its beforeAll started it");
      return origin;
    },
  };
}

describe("receipt reads that fail (real processes, a pass-through that withholds receipts)", () => {
  describe("a transfer", BESIDE, () => {
    const { stack, proxy, origin } = useWithholdingStack();

    it("keeps a mined transfer whose receipt cannot be read in flight past decideAfterMs, never failed; it confirms once the receipts are read again", async ({
      expect,
    }) => {
      // Mutation: a failed receipt read counted as "no receipt" (the code before) marks the transfer's
      // passed nonce, and decideAfterMs later ends it `failed`, "nothing moved", though it was paid.
      const agent = await stack.newAgent({ units: 5_000_000n });
      const recipient = newAccount().address;
      const calls = agentCalls(origin().base, agent.token);
      const chain = publicClientFor(stack.devnet.url);
      proxy.withhold("eth_getTransactionReceipt");
      let statuses: string[];
      try {
        const body = { idempotency_key: newKey(), to: recipient, amount: "2000000" };
        const answer = await calls.transfer(body);
        expect(answer.status, JSON.stringify(answer.body)).toBe(202);
        const actionId = (answer.body as ActionView).action_id;
        // Mined on arrival: the recipient is paid and the sender's nonce has passed the transfer.
        await expect
          .poll(() => chain.getBalance({ address: recipient }), { timeout: 10_000 })
          .toBe(2_000_000n * WEI_PER_UNIT);
        expect(await chain.getTransactionCount({ address: agent.wallet })).toBe(1);
        // The nonce stays passed well past decideAfterMs (and the two seconds a submitted transaction
        // is left alone), the receipts unread all along.
        const seen = new Set<string>();
        const until = Date.now() + 2_000 + DECIDE_AFTER_MS * 3;
        while (Date.now() < until) {
          seen.add(((await calls.action(actionId)).body as ActionView).status);
          await sleep(100);
        }
        expect(proxy.withheld).toBeGreaterThan(0);
        statuses = [...seen];
        expect(statuses).not.toContain("failed");
        const rows = await queryRows<{ status: string }>(
          stack.db.handle.db,
          sql`select status from outgoing_transactions where sender = ${agent.wallet.toLowerCase()}`,
        );
        expect(rows).toEqual([{ status: "submitted" }]);
        proxy.withhold(undefined);
        const ended = await calls.settled(actionId, 20_000);
        expect(ended).toMatchObject({ status: "confirmed" });
        const repeat = await calls.transfer(body);
        expect(repeat.status).toBe(200);
        expect(repeat.body).toMatchObject({ action_id: actionId, status: "confirmed" });
      } finally {
        proxy.withhold(undefined);
      }
      expect(await chain.getBalance({ address: recipient })).toBe(2_000_000n * WEI_PER_UNIT);
    }, 60_000);
  });

  describe("an x402 settlement", BESIDE, () => {
    const { stack, proxy, origin } = useWithholdingStack();

    it("keeps a mined x402 settlement whose receipt cannot be read pending past decideAfterMs, never failed; once read, the same payment is paid, once", async ({
      expect,
    }) => {
      // Mutation: as above; the settlement ended `failed` with broadcast_refused, and the same
      // payment presented again was told so, though the payee had been paid.
      const demo = `${origin().base}/x402/demo`;
      const payer = await fundedPayer(stack.devnet.url);
      const payment = paymentHeader(await envelope(demo, payer));
      const chain = publicClientFor(stack.devnet.url);
      const before = await chain.getBalance({ address: payTo });
      const settlement = async () =>
        (
          await queryRows<{ status: string; error_reason: string | null }>(
            stack.db.handle.db,
            sql`select status, error_reason from x402_settlements where payer = ${payer.address.toLowerCase()}`,
          )
        )[0];
      proxy.withhold("eth_getTransactionReceipt");
      try {
        const pending = await pay(demo, payment);
        expect(pending.status, JSON.stringify(pending.body)).toBe(402);
        expect(pending.body.error).toBe(X402_REASONS.settlementPending);
        // Mined on arrival: the payee is paid.
        await expect
          .poll(() => chain.getBalance({ address: payTo }), { timeout: 10_000 })
          .toBe(before + X402_AMOUNT * WEI_PER_UNIT);
        const seen = new Set<string>();
        const until = Date.now() + 2_000 + DECIDE_AFTER_MS * 3;
        while (Date.now() < until) {
          seen.add((await settlement())!.status);
          await sleep(100);
        }
        expect([...seen]).toEqual(["submitted"]);
      } finally {
        proxy.withhold(undefined);
      }
      await expect.poll(async () => (await settlement())!.status, { timeout: 20_000 }).toBe("settled");
      // The answer it was owed ("present the same payment again"): paid, by the one transaction.
      const paid = await pay(demo, payment);
      expect(paid.status, JSON.stringify(paid.body)).toBe(200);
      expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
      expect(await chain.getBalance({ address: payTo })).toBe(before + X402_AMOUNT * WEI_PER_UNIT);
    }, 60_000);
  });

  /**
   * A transfer of a new agent's whose nonce another transaction took, seen passed with no receipt
   * (its passed-nonce mark set), sent by an origin that replaces a stuck transaction half a second
   * after its signing and decides after CHAINED_DECIDE_AFTER_MS. That origin reaches the devnet through a
   * pass-through that runs the other signer's broadcast just before its own, then through the one
   * that withholds receipts, shared with the block's own origin (useWithholdingStack), whose tracker decides after
   * DECIDE_AFTER_MS: the two trackers mark the same rows. Runs `then` with it, the receipts read.
   */
  async function withNonceTaken(
    { stack, proxy }: Withholding,
    expect: ExpectStatic,
    then: (
      transfer: () => Promise<{ status: string; marked: boolean }>,
      settled: () => Promise<unknown>,
    ) => Promise<void>,
  ): Promise<void> {
    const refusing = await startRpcRefusalProxy(proxy.url);
    try {
      const chained = await stack.startOrigin(
        {},
        { periodMs: 100, signedGraceMs: 500, decideAfterMs: CHAINED_DECIDE_AFTER_MS, replaceAfterMs: 500 },
        refusing.url,
      );
      const chain = publicClientFor(stack.devnet.url);
      const agent = await stack.newAgent({ units: 5_000_000n });
      // The same key signs another transfer at nonce 0 over the enclave's socket (as a compromised
      // origin would), mined just before the origin's transfer reaches the chain (foreign-nonce.int.test.ts).
      const tookNonce = refusing.beforeNextSend(async () => {
        await mineForeignTransferAtNonceZero({ signer: stack.signer, chain, agent });
      });
      const calls = agentCalls(chained.base, agent.token);
      const answer = await calls.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "2000000",
      });
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      await tookNonce;
      const actionId = (answer.body as ActionView).action_id;
      const transfer = async () =>
        (
          await queryRows<{ status: string; marked: boolean }>(
            stack.db.handle.db,
            sql`select status, nonce_passed_at is not null as marked from outgoing_transactions
                where sender = ${agent.wallet.toLowerCase()}`,
          )
        )[0]!;
      // The chain answered "no receipt" and the nonce passed: the wait for decideAfterMs has begun.
      await expect.poll(async () => (await transfer()).marked, { timeout: 10_000 }).toBe(true);
      await then(transfer, () => calls.settled(actionId, 20_000));
    } finally {
      proxy.withhold(undefined);
      await refusing.close();
    }
  }

  describe("a transfer whose nonce was taken, its receipt reads failing", BESIDE, () => {
    const withholding = useWithholdingStack();
    const { proxy } = withholding;

    it("no filler is tried again and again for a transaction whose nonce the chain has passed while its receipt reads fail", async ({
      expect,
    }) => {
      // Mutation: the filler sweep trying it each sweep (as it did: a database transaction and a
      // nonce read each, the chain's answer "decided" each time) reads the sender's nonce each time.
      await withNonceTaken(withholding, expect, async (transfer) => {
        proxy.withhold("eth_getTransactionReceipt");
        const nonceReads = proxy.calls("eth_getTransactionCount");
        await sleep(3_000);
        expect(await transfer()).toMatchObject({ status: "submitted" });
        // At most a filler tried at the outage's start (the sweep already under way), none after.
        expect(proxy.calls("eth_getTransactionCount") - nonceReads).toBeLessThanOrEqual(1);
      });
    }, 60_000);
  });

  describe("a transfer whose nonce was taken, seen passed before its receipt reads failed", BESIDE, () => {
    const withholding = useWithholdingStack();
    const { proxy } = withholding;

    it("a transfer whose nonce another transaction took, seen passed before the receipt reads failed, is not ended by the first null answer after the outage but decideAfterMs later", async ({
      expect,
    }) => {
      // Mutation: a failed read leaving the passed-nonce mark (as it did) lets the first null answer
      // after the outage end the transfer at once.
      await withNonceTaken(withholding, expect, async (transfer, settled) => {
        proxy.withhold("eth_getTransactionReceipt");
        await sleep(CHAINED_DECIDE_AFTER_MS + 1_500);
        expect(await transfer()).toMatchObject({ status: "submitted" });
        proxy.withhold(undefined);
        // The first null answer after the outage starts the wait again (the shorter one is the first
        // origin's, DECIDE_AFTER_MS).
        await sleep(DECIDE_AFTER_MS / 2);
        expect(await transfer()).toMatchObject({ status: "submitted" });
        expect(await settled()).toMatchObject({ status: "failed", error_code: "broadcast_refused" });
      });
    }, 60_000);
  });
});
