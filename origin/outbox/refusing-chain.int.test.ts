import { sql } from "drizzle-orm";
import type { Address, Hex } from "viem";
import { describe, it } from "vitest";
import {
  fund,
  newAccount,
  publicClientFor,
  transferWithAuthorizationCalldata,
  walletClientFor,
} from "../../devnet/testing.ts";
import { NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import { agentCalls, isAccepted, newKey } from "../../testing/money-client.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import {
  INSUFFICIENT_FUNDS_MESSAGE,
  type SentTransaction,
  startRpcRefusalProxy,
} from "../../testing/rpc-refusal-proxy.ts";
import { useFixture, useMoneyStack } from "../../testing/stack.ts";
import { envelope, fundedPayer, pay, paymentHeader } from "../../testing/x402-payer.ts";
import { queryRows } from "../db/client.ts";
import { X402_REASONS } from "../x402/reasons.ts";

// The money path when a node refuses a signed transaction, against the real processes: the origin
// reaches the devnet only through a fault injector (testing/rpc-refusal-proxy.ts) that refuses
// chosen eth_sendRawTransaction calls with geth's error, or has the devnet raise its base fee
// between the quote and the broadcast so that the devnet itself refuses. A refusal ends nothing: the
// transaction stays in flight (`submitted`, with the node's words) and keeps its nonce, which is
// never handed out again; the tracker replaces it with a filler at the same nonce, and only once
// the chain has mined the filler does the payment end `failed`, nothing moved. Nothing else in the
// batch notices, and the sender's next transaction takes the next nonce.

const X402_AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

/**
 * Adjacent concurrent blocks run at once, each on a stack of its own (devnet, enclave, database,
 * refusing pass-through and origins): every origin's tracker follows every transaction of its
 * database, and a test's faults (a raised base fee, broadcasts held back, a send run first) are
 * its devnet's or its pass-through's. One block's tests turn on agent wallets and the treasury,
 * the other's on the settler; each block's tests run in turn, as the file's did.
 */
const BESIDE = { concurrent: true } as const;

/** A stack, its refusing pass-through and the origin behind it, for the describe block it is called in. */
function useRefusingStack() {
  // The stack's own origin reaches the devnet directly: its tracker is slowed right down, so the
  // origin behind the pass-through is the one that signs, broadcasts and follows.
  const stack = useMoneyStack(
    {
      x402: { amountUnits: X402_AMOUNT, payTo },
      tracker: { periodMs: 3_600_000 },
      env: { AGENT_FAUCET_COOLDOWN_MS: "1000", AGENT_X402_RECEIPT_TIMEOUT_MS: "1500" },
    },
    { timeoutMs: 120_000 },
  );
  const proxy = useFixture(
    "refusing pass-through",
    () => startRpcRefusalProxy(stack.devnet.url),
    (refusing) => refusing.close(),
    { timeoutMs: 120_000 },
  );
  // Stopped with the stack, which closes every origin it started.
  const origin = useFixture(
    "origin behind the pass-through",
    () => stack.startOrigin({}, { periodMs: 100, signedGraceMs: 500 }, proxy.url),
    async () => {},
    { timeoutMs: 120_000 },
  );
  const chain = useFixture(
    "chain client",
    async () => publicClientFor(stack.devnet.url),
    async () => {},
  );

  const sentBy = (wallet: string) =>
    queryRows<{ nonce: string; purpose: string; status: string }>(
      stack.db.handle.db,
      sql`select nonce::text as nonce, purpose, status from outgoing_transactions where sender = ${wallet.toLowerCase()}
          order by nonce, created_at`,
    );
  const actionRow = (actionId: string) =>
    queryRows<{ status: string; error_code: string | null; error_message: string | null }>(
      stack.db.handle.db,
      sql`select status, error_code, error_message from agent_actions where action_id = ${actionId}`,
    ).then((rows) => rows[0]);
  const transfer = (agent: StackAgent, to: string, amount = "1000", key = newKey()) =>
    agentCalls(origin.base, agent.token).transfer({ idempotency_key: key, to, amount });
  return { stack, proxy, origin, chain, sentBy, actionRow, transfer };
}

/** A payment of `from` (not a filler: a filler pays its sender itself). */
const paymentOf = (from: string) => (tx: SentTransaction) =>
  tx.from === from.toLowerCase() && tx.to !== from.toLowerCase();

// A gap: the chain refuses a transaction after a later one of the same sender was signed and
// taken. Made so in that order for sure: the first broadcast is answered "txpool is full" (a
// transient failure: the transaction stays signed), the sender's next transaction is signed and
// sent, and the tracker's resend of the first is then refused. The later one waits in the
// node's queue behind the hole until the service fills it.
//
// Mutation for both: the tracker never replaces a stuck transaction (replaceStuck not called): the later
// transaction stays submitted and the wait for it runs out.
const POOL_FULL = "txpool is full";

describe("a chain that refuses a signed transaction (real processes, a refusing pass-through)", () => {
  describe("agent wallets and the treasury", BESIDE, () => {
    const { stack, proxy, origin, chain, sentBy, actionRow, transfer } = useRefusingStack();

    it.sequential("keeps a transfer a node refuses in flight with the node's words until a filler takes its nonce; then it ends failed, nothing moved; the batch's other agents confirm; the wallet's next transfer, sent meanwhile, takes the next nonce and confirms", async ({
      expect,
    }) => {
      const [refused, other, third] = await stack.newAgents(3, { units: 1_000_000n });
      const recipient = newAccount().address;
      const wallet = refused!.wallet.toLowerCase();
      const calls = agentCalls(origin.base, refused!.token);
      const key = newKey();
      // Its payment at nonce 0 is refused by every node it reaches.
      const refusing = proxy.refuseEvery((tx) => paymentOf(wallet)(tx) && tx.nonce === 0);
      // The filler is held back too for a while (a full pool: it is sent again and again), so the
      // transfer is seen in flight for as long as the test looks.
      const holding = proxy.refuseEvery((tx) => tx.from === wallet && tx.to === wallet, "txpool is full");
      let views: ActionView[];
      let behindId = "";
      try {
        // Together, so the three share a batch (and its JSON-RPC batch of broadcasts).
        const answers = await Promise.all([
          transfer(refused!, recipient, "1000", key),
          transfer(other!, recipient),
          transfer(third!, recipient),
        ]);
        expect(answers.every(isAccepted)).toBe(true);
        expect((await refusing.first).nonce).toBe(0);
        await holding.first;
        const refusedId = (answers[0]!.body as ActionView).action_id;
        // Mutation: a refusal ending the transfer `failed` at once (as before) fails this: the agent
        // would be told "nothing moved" while a node that took the bytes can still mine them.
        const inFlight = { status: "submitted", last_broadcast_error: INSUFFICIENT_FUNDS_MESSAGE };
        expect((await calls.action(refusedId)).body).toMatchObject(inFlight);
        // A repeat of its key answers the same: in flight, with the node's words.
        const repeated = await transfer(refused!, recipient, "1000", key);
        expect(repeated.status).toBe(202);
        expect(repeated.body).toMatchObject({ action_id: refusedId, ...inFlight });
        // The wallet's next transfer, sent while the refused one is in flight, takes the next nonce:
        // a nonce is never handed out again while its transaction can still be mined. Mutation:
        // handing a refused nonce out again when nothing was signed after it (the code before) signs
        // this one at nonce 0 too.
        const behind = await transfer(refused!, recipient, "2000");
        expect(behind.status, JSON.stringify(behind.body)).toBe(202);
        behindId = (behind.body as ActionView).action_id;
        expect(await sentBy(wallet)).toEqual([
          { nonce: "0", purpose: "transfer", status: "submitted" },
          { nonce: "0", purpose: "filler", status: expect.stringMatching(/^(signed|submitted)$/) },
          { nonce: "1", purpose: "transfer", status: expect.stringMatching(/^(signed|submitted)$/) },
        ]);
        holding.stop();
        views = await Promise.all(
          answers.map((answer, n) =>
            agentCalls(origin.base, [refused!, other!, third!][n]!.token).settled(
              (answer.body as ActionView).action_id,
            ),
          ),
        );
      } finally {
        holding.stop();
        refusing.stop();
      }
      expect(views.map((view) => view.status)).toEqual(["failed", "confirmed", "confirmed"]);
      expect(views[0]).toMatchObject({ error_code: "broadcast_refused", last_broadcast_error: null });
      expect(await actionRow(views[0]!.action_id)).toMatchObject({
        error_code: "broadcast_refused",
        error_message: expect.stringMatching(/^its nonce 0 went to filler 0x[0-9a-f]{64}, mined instead/),
      });
      // A repeat of the key answers the proven failure, with what happened.
      const repeat = await transfer(refused!, recipient, "1000", key);
      expect(repeat.status).toBe(422);
      expect(repeat.body).toMatchObject({
        error: { code: "broadcast_refused", message: expect.stringMatching(/nothing moved/) },
      });
      // The filler is the agent's too: an action of its own, named by the transfer it replaced, with
      // the fee its wallet paid.
      expect(views[0]!.replaced_by).toMatch(/^[0-9a-f-]{36}$/);
      const fillerView = (await calls.action(views[0]!.replaced_by!)).body as ActionView;
      expect(fillerView).toMatchObject({ kind: "filler", status: "confirmed", amount: "0", to: wallet });
      expect(BigInt(fillerView.fee_wei!)).toBeGreaterThan(0n);

      // The transfer behind the stuck nonce waited for it, and confirms once the filler is mined.
      expect((await calls.settled(behindId)).status).toBe("confirmed");
      expect(await sentBy(wallet)).toEqual([
        { nonce: "0", purpose: "transfer", status: "failed" },
        { nonce: "0", purpose: "filler", status: "confirmed" },
        { nonce: "1", purpose: "transfer", status: "confirmed" },
      ]);
      expect(await chain.getTransactionCount({ address: refused!.wallet })).toBe(2);
      expect(await chain.getBalance({ address: recipient })).toBe((1_000n + 1_000n + 2_000n) * WEI_PER_UNIT);
    }, 90_000);

    it.sequential("replaces a transfer the devnet itself refuses (its base fee rose past the quote) with a filler at a higher fee; the transfer ends failed and the next, quoted again, confirms at the next nonce", async ({
      expect,
    }) => {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const recipient = newAccount().address;
      // Over the quoted cap (twice the base fee, at most the genesis's 1 gwei, plus the 1 gwei tip),
      // and low enough that the filler's and the next quotes stay under the sealed fee ceiling.
      expect((await chain.getBlock()).baseFeePerGas).toBeLessThanOrEqual(1_000_000_000n);
      const rise = proxy.raiseBaseFeeBeforeSend(4_000_000_000n);
      const answer = await transfer(agent, recipient);
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      await rise;
      const calls = agentCalls(origin.base, agent.token);
      const view = await calls.settled((answer.body as ActionView).action_id, 30_000);
      expect(view).toMatchObject({ status: "failed", error_code: "broadcast_refused" });
      expect(await actionRow(view.action_id)).toMatchObject({
        error_message: expect.stringMatching(/max fee per gas less than block base fee/),
      });
      // The fee oracle reuses a reading for a second: the next quote reads the raised fee.
      await sleep(1_100);
      const next = await transfer(agent, recipient);
      expect(next.status, JSON.stringify(next.body)).toBe(202);
      expect((await calls.settled((next.body as ActionView).action_id)).status).toBe("confirmed");
      expect(await sentBy(agent.wallet)).toEqual([
        { nonce: "0", purpose: "transfer", status: "failed" },
        { nonce: "0", purpose: "filler", status: "confirmed" },
        { nonce: "1", purpose: "transfer", status: "confirmed" },
      ]);
      expect(await chain.getBalance({ address: recipient })).toBe(1_000n * WEI_PER_UNIT);
    }, 90_000);

    it.sequential("replaces a faucet payout a node refuses with a treasury filler; the payout ends failed, and the treasury's next payout confirms at the next nonce", async ({
      expect,
    }) => {
      const [first, second] = await stack.newAgents(2, {});
      const treasury = stack.treasury.toLowerCase();
      const treasuryNonce = await chain.getTransactionCount({ address: stack.treasury });
      const refusing = proxy.refuseEvery(paymentOf(treasury));
      let refusedView: ActionView;
      try {
        const refusedAnswer = await agentCalls(origin.base, first!.token).faucet();
        expect(refusedAnswer.status, JSON.stringify(refusedAnswer.body)).toBe(202);
        expect((await refusing.first).nonce).toBe(treasuryNonce);
        refusedView = await agentCalls(origin.base, first!.token).settled(
          (refusedAnswer.body as ActionView).action_id,
        );
      } finally {
        refusing.stop();
      }
      expect(refusedView).toMatchObject({ status: "failed", error_code: "broadcast_refused" });
      expect(await actionRow(refusedView.action_id)).toMatchObject({
        error_message: expect.stringContaining(INSUFFICIENT_FUNDS_MESSAGE),
      });

      const paid = await agentCalls(origin.base, second!.token).faucet();
      expect(paid.status, JSON.stringify(paid.body)).toBe(202);
      expect(
        (await agentCalls(origin.base, second!.token).settled((paid.body as ActionView).action_id)).status,
      ).toBe("confirmed");
      const rows = (await sentBy(treasury)).filter((row) => BigInt(row.nonce) >= BigInt(treasuryNonce));
      expect(rows).toEqual([
        { nonce: String(treasuryNonce), purpose: "faucet", status: "failed" },
        { nonce: String(treasuryNonce), purpose: "filler", status: "confirmed" },
        { nonce: String(treasuryNonce + 1), purpose: "faucet", status: "confirmed" },
      ]);
      expect(await chain.getBalance({ address: second!.wallet })).toBe(1_000_000n * WEI_PER_UNIT);
      expect(await chain.getBalance({ address: first!.wallet })).toBe(0n);
    }, 90_000);

    it.sequential("keeps a refused payout to its own agent: the other agents' payouts asked for at the same time confirm", async ({
      expect,
    }) => {
      const agents = await stack.newAgents(3, {});
      const refusedWallet = agents[0]!.wallet.toLowerCase();
      const refusing = proxy.refuseEvery(
        (tx) => tx.from === stack.treasury.toLowerCase() && tx.to === refusedWallet,
      );
      let views: ActionView[];
      try {
        const answers = await Promise.all(
          agents.map((agent) => agentCalls(origin.base, agent.token).faucet()),
        );
        expect(answers.map((answer) => answer.status)).toEqual([202, 202, 202]);
        await refusing.first;
        views = await Promise.all(
          answers.map((answer, n) =>
            agentCalls(origin.base, agents[n]!.token).settled((answer.body as ActionView).action_id, 30_000),
          ),
        );
      } finally {
        refusing.stop();
      }
      // A payout signed behind the refused one waits for the filler at its nonce (outbox/fillers.ts).
      expect(views.map((view) => view.status)).toEqual(["failed", "confirmed", "confirmed"]);
      expect(await chain.getBalance({ address: agents[0]!.wallet })).toBe(0n);
      for (const agent of agents.slice(1)) {
        expect(await chain.getBalance({ address: agent.wallet })).toBe(1_000_000n * WEI_PER_UNIT);
      }
    }, 90_000);

    it.sequential("sends a submitted transaction the node dropped again, and it confirms", async ({
      expect,
    }) => {
      // The node answers the broadcast with the hash and lets the transaction go. An origin whose
      // tracker sends a submitted transaction again after a second without a receipt.
      // Mutation: the tracker not sending `submitted` transactions again leaves it submitted for good.
      const resending = await stack.startOrigin({}, { periodMs: 100, resendAfterMs: 1_000 }, proxy.url);
      const agent = await stack.newAgent({ units: 1_000_000n });
      const recipient = newAccount().address;
      const dropped = proxy.dropOnce((tx) => tx.from === agent.wallet.toLowerCase());
      const calls = agentCalls(resending.base, agent.token);
      const answer = await calls.transfer({ idempotency_key: newKey(), to: recipient, amount: "1000" });
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      const lost = await dropped;
      expect((await calls.settled((answer.body as ActionView).action_id)).status).toBe("confirmed");
      expect(proxy.sent.filter((tx) => tx.hash === lost.hash).length).toBeGreaterThan(1);
      expect(await sentBy(agent.wallet)).toEqual([{ nonce: "0", purpose: "transfer", status: "confirmed" }]);
      expect(await chain.getBalance({ address: recipient })).toBe(1_000n * WEI_PER_UNIT);
    }, 60_000);

    it.sequential("closes a nonce gap of an agent wallet without an operator: the transfer behind it confirms, and so does the next", async ({
      expect,
    }) => {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const wallet = agent.wallet.toLowerCase();
      const recipient = newAccount().address;
      const first = (tx: { from: string; nonce: number }) => tx.from === wallet && tx.nonce === 0;
      const dropped = proxy.refuseOnce(first, POOL_FULL);
      const refusal = proxy.refuseOnce(first);
      const refusedAnswer = await transfer(agent, recipient, "1000");
      expect(refusedAnswer.status, JSON.stringify(refusedAnswer.body)).toBe(202);
      await dropped;
      const behind = await transfer(agent, recipient, "2000");
      expect(behind.status, JSON.stringify(behind.body)).toBe(202);
      await refusal;
      const calls = agentCalls(origin.base, agent.token);
      expect((await calls.settled((refusedAnswer.body as ActionView).action_id)).status).toBe("failed");
      expect((await calls.settled((behind.body as ActionView).action_id)).status).toBe("confirmed");
      const next = await transfer(agent, recipient, "3000");
      expect(next.status, JSON.stringify(next.body)).toBe(202);
      expect((await calls.settled((next.body as ActionView).action_id)).status).toBe("confirmed");
      const rows = await queryRows<{ nonce: string; purpose: string; status: string }>(
        stack.db.handle.db,
        sql`select nonce::text as nonce, purpose, status from outgoing_transactions where sender = ${wallet}
            order by nonce, created_at`,
      );
      expect(rows).toEqual([
        { nonce: "0", purpose: "transfer", status: "failed" },
        { nonce: "0", purpose: "filler", status: "confirmed" },
        { nonce: "1", purpose: "transfer", status: "confirmed" },
        { nonce: "2", purpose: "transfer", status: "confirmed" },
      ]);
      expect(await chain.getTransactionCount({ address: agent.wallet })).toBe(3);
      expect(await chain.getBalance({ address: recipient })).toBe(5_000n * WEI_PER_UNIT);
    }, 60_000);
  });

  describe("the settler", BESIDE, () => {
    const { stack, proxy, origin, chain, sentBy } = useRefusingStack();

    it.sequential("keeps a refused settlement to its own payment: the payments presented at the same time settle, and the refused one is named as pending, never as unpaid", async ({
      expect,
    }) => {
      const demo = `${origin.base}/x402/demo`;
      const payers = await Promise.all(Array.from({ length: 3 }, () => fundedPayer(stack.devnet.url)));
      const payments = await Promise.all(
        payers.map(async (payer) => paymentHeader(await envelope(demo, payer))),
      );
      // The settlement's calldata carries its payer's address.
      const refusedPayer = payers[0]!.address.slice(2).toLowerCase();
      const refusing = proxy.refuseEvery(
        (tx) => tx.from === stack.settler!.toLowerCase() && tx.data.toLowerCase().includes(refusedPayer),
      );
      const before = await chain.getBalance({ address: payTo });
      let answers: Awaited<ReturnType<typeof pay>>[];
      try {
        answers = await Promise.all(payments.map((payment) => pay(demo, payment)));
        await refusing.first;
      } finally {
        refusing.stop();
      }
      expect(answers.map((answer) => `${answer.status} ${answer.body.error ?? "paid"}`)).toEqual([
        `402 ${X402_REASONS.settlementPending}`,
        "200 paid",
        "200 paid",
      ]);
      // Every answer after a broadcast names the transaction.
      expect(answers[0]!.response!.transaction).toMatch(/^0x[0-9a-f]{64}$/);
      expect((await chain.getBalance({ address: payTo })) - before).toBe(2n * X402_AMOUNT * WEI_PER_UNIT);
    }, 90_000);

    it.sequential("answers a refused settlement settlement_pending naming its transaction; once a filler took the settler's nonce, the same payment answers broadcast_refused, and the next payment settles", async ({
      expect,
    }) => {
      const settler = stack.settler!.toLowerCase();
      const demo = `${origin.base}/x402/demo`;
      const settlerNonce = await chain.getTransactionCount({ address: stack.settler! });
      const refusedPayer = await fundedPayer(stack.devnet.url);
      const payment = paymentHeader(await envelope(demo, refusedPayer));
      const refusing = proxy.refuseEvery(paymentOf(settler));
      try {
        const refused = await pay(demo, payment);
        expect(refused.status).toBe(402);
        expect(refused.body.error).toBe(X402_REASONS.settlementPending);
        expect(refused.response).toMatchObject({ success: false, transaction: expect.stringMatching(/^0x/) });
        expect((await refusing.first).nonce).toBe(settlerNonce);
        // The chain decides: the filler is mined at the settler's nonce, and the settlement ends failed.
        await expect
          .poll(
            () =>
              queryRows<{ status: string; error_reason: string | null }>(
                stack.db.handle.db,
                sql`select status, error_reason from x402_settlements where payer = ${refusedPayer.address.toLowerCase()}`,
              ),
            { timeout: 20_000 },
          )
          .toEqual([{ status: "failed", error_reason: "broadcast_refused" }]);
      } finally {
        refusing.stop();
      }
      // The same payment presented again learns it was never settled: nothing moved.
      const again = await pay(demo, payment);
      expect(again.status).toBe(402);
      expect(again.body.error).toBe(X402_REASONS.broadcastRefused);

      const payer = await fundedPayer(stack.devnet.url);
      const before = await chain.getBalance({ address: payTo });
      const settled = await pay(demo, paymentHeader(await envelope(demo, payer)));
      expect(settled.status, JSON.stringify(settled.body)).toBe(200);
      expect(settled.response).toMatchObject({ success: true });
      const rows = (await sentBy(settler)).filter((row) => BigInt(row.nonce) >= BigInt(settlerNonce));
      expect(rows).toEqual([
        { nonce: String(settlerNonce), purpose: "settlement", status: "failed" },
        { nonce: String(settlerNonce), purpose: "filler", status: "confirmed" },
        { nonce: String(settlerNonce + 1), purpose: "settlement", status: "confirmed" },
      ]);
      expect((await chain.getBalance({ address: payTo })) - before).toBe(X402_AMOUNT * WEI_PER_UNIT);
    }, 90_000);

    it.sequential("answers a settlement another relayer front-ran 402 transaction_failed and ends it reverted, never settled", async ({
      expect,
    }) => {
      // Another relayer submits the same authorization just before ours reaches the chain: ours is
      // mined and reverts (the authorization is used), its gas paid.
      // Mutation: reading a mined receipt as settled whatever its status answers 200 here.
      const demo = `${origin.base}/x402/demo`;
      const payer = await fundedPayer(stack.devnet.url);
      const payment = await envelope(demo, payer);
      const relayer = newAccount();
      await fund(stack.devnet.url, relayer.address, 1_000_000n * WEI_PER_UNIT);
      const { authorization, signature } = payment.payload as {
        authorization: Record<string, string>;
        signature: Hex;
      };
      let frontRun: Hex | undefined;
      const ranFirst = proxy.beforeNextSend(async () => {
        frontRun = await walletClientFor(stack.devnet.url, relayer).sendTransaction({
          to: NATIVE_TRANSFER_AUTH_ADDRESS,
          data: transferWithAuthorizationCalldata(
            {
              from: authorization.from as Address,
              to: authorization.to as Address,
              value: BigInt(authorization.value!),
              validAfter: BigInt(authorization.validAfter!),
              validBefore: BigInt(authorization.validBefore!),
              nonce: authorization.nonce as Hex,
            },
            signature,
          ),
          gas: 100_000n,
        });
        await chain.waitForTransactionReceipt({ hash: frontRun });
      });
      const before = await chain.getBalance({ address: payTo });
      const answer = await pay(demo, paymentHeader(payment));
      await ranFirst;
      expect(answer.status, JSON.stringify(answer.body)).toBe(402);
      expect(answer.body.error).toBe(X402_REASONS.transactionFailed);
      expect(answer.response).toMatchObject({ success: false, errorReason: X402_REASONS.transactionFailed });
      const transaction = answer.response!.transaction as Hex;
      expect((await chain.getTransactionReceipt({ hash: transaction })).status).toBe("reverted");
      expect(
        await queryRows(
          stack.db.handle.db,
          sql`select status from x402_settlements
          where payer = ${payer.address.toLowerCase()}`,
        ),
      ).toEqual([{ status: "reverted" }]);
      // The payee was paid once, by the other relayer's transaction.
      expect((await chain.getBalance({ address: payTo })) - before).toBe(X402_AMOUNT * WEI_PER_UNIT);
    }, 60_000);

    it.sequential("settles 30 concurrent payments on 30 distinct settler nonces while the node takes its time to mine", async ({
      expect,
    }) => {
      // Each broadcast is taken at once and mined 300 ms later, so a batch signs while the one
      // before it is not mined yet: the chain's nonce lags the stored one. On a devnet that mines on
      // arrival the two are always equal. Mutation: the settler's next nonce taken from the chain
      // alone (not the greater of it and the stored one) signs a nonce twice.
      // An origin that waits as long as a paid request does by default for its receipt (this file's
      // stack waits 1.5 s, so that a refused settlement answers soon).
      const patient = await stack.startOrigin(
        { AGENT_X402_RECEIPT_TIMEOUT_MS: "10000" },
        { periodMs: 100, signedGraceMs: 500 },
        proxy.url,
      );
      proxy.delaySends(300);
      try {
        const demo = `${patient.base}/x402/demo`;
        const payers = await Promise.all(Array.from({ length: 30 }, () => fundedPayer(stack.devnet.url)));
        const payments = await Promise.all(
          payers.map(async (payer) => paymentHeader(await envelope(demo, payer))),
        );
        const answers = await Promise.all(payments.map((payment) => pay(demo, payment)));
        expect(answers.map((answer) => `${answer.status} ${answer.body.error ?? "paid"}`)).toEqual(
          Array(30).fill("200 paid"),
        );
        const rows = await queryRows<{ status: string; settler_nonce: string }>(
          stack.db.handle.db,
          sql`select status, settler_nonce::text from x402_settlements
              where payer = any(${`{${payers.map((payer) => payer.address.toLowerCase()).join(",")}}`}::text[])`,
        );
        expect(rows.map((row) => row.status)).toEqual(Array(30).fill("settled"));
        expect(new Set(rows.map((row) => row.settler_nonce)).size).toBe(30);
      } finally {
        proxy.delaySends(undefined);
      }
    }, 120_000);

    it.sequential("closes a nonce gap of the settler without an operator: the settlement behind it settles", async ({
      expect,
    }) => {
      const settler = stack.settler!.toLowerCase();
      const demo = `${origin.base}/x402/demo`;
      const nonce = await chain.getTransactionCount({ address: stack.settler! });
      const first = (tx: { from: string; nonce: number }) => tx.from === settler && tx.nonce === nonce;
      const dropped = proxy.refuseOnce(first, POOL_FULL);
      const refusal = proxy.refuseOnce(first);
      const before = await chain.getBalance({ address: payTo });
      const firstPayer = await fundedPayer(stack.devnet.url);
      // Its transaction is refused on the resend: it never settles (its wait for a receipt runs out).
      const firstAnswer = pay(demo, paymentHeader(await envelope(demo, firstPayer)));
      await dropped;
      const payer = await fundedPayer(stack.devnet.url);
      const behind = await pay(demo, paymentHeader(await envelope(demo, payer)));
      await refusal;
      expect(behind.status, JSON.stringify(behind.body)).toBe(200);
      expect((await firstAnswer).status).toBe(402);
      // The settlement behind the gap is recorded by its own batch's receipt read; the filler's
      // receipt, and with it the refused settlement's failure, by the tracker's next pass, which on
      // a loaded machine can come after both answers.
      const rows = () =>
        queryRows<{ nonce: string; purpose: string; status: string }>(
          stack.db.handle.db,
          sql`select nonce::text as nonce, purpose, status from outgoing_transactions
              where sender = ${settler} and nonce >= ${nonce} order by nonce, created_at`,
        );
      await expect.poll(rows).toEqual([
        { nonce: String(nonce), purpose: "settlement", status: "failed" },
        { nonce: String(nonce), purpose: "filler", status: "confirmed" },
        { nonce: String(nonce + 1), purpose: "settlement", status: "confirmed" },
      ]);
      const settlements = await queryRows<{ payer: string; status: string }>(
        stack.db.handle.db,
        sql`select payer, status from x402_settlements
            where payer in (${firstPayer.address.toLowerCase()}, ${payer.address.toLowerCase()}) order by status`,
      );
      expect(settlements).toEqual([
        { payer: firstPayer.address.toLowerCase(), status: "failed" },
        { payer: payer.address.toLowerCase(), status: "settled" },
      ]);
      expect((await chain.getBalance({ address: payTo })) - before).toBe(X402_AMOUNT * WEI_PER_UNIT);
    }, 60_000);
  });
});
