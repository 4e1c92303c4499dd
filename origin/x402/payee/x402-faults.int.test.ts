import type { PaymentPayload } from "@x402/core/types";
import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount, publicClientFor, rpc } from "../../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../../shared/constants.ts";
import { useRpcCutProxy } from "../../../testing/fault-scenario.ts";
import { spawnOrigin } from "../../../testing/origin-process.ts";
import { startRpcAfterReadProxy } from "../../../testing/rpc-after-read-proxy.ts";
import { useFixture, useMoneyStack } from "../../../testing/stack.ts";
import { expectRetryPaidOnce } from "../../../testing/x402-paid-once.ts";
import { envelope, fundedPayer, type PaidAnswer, pay, paymentHeader } from "../../../testing/x402-payer.ts";
import { payerLeavesWhileMined, retryLeavesWhilePending } from "../../../testing/x402-payer-leaves.ts";
import { authorizationUsedCount } from "../../../testing/x402-settlements.ts";
import { queryRows } from "../../db/client.ts";
import { X402_REASONS } from "../reasons.ts";
import { sha256 } from "./earlier-presentation.ts";

// Settlement safety when parts fail, against the real processes: an origin
// SIGKILLed between the settle broadcast and its receipt, and a chain that stops answering after it
// accepted the settlement. Each time the payment is settled exactly once, and whoever presents the
// same payment again is told of the original transaction: pending while it is, paid once it is to
// the one retry a pending answer owed, the nonce used to any other.

const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

/** The same authorization with its signature's v as 0/1 instead of 27/28: another payload of its (from, nonce), as valid. */
function reencoded(payment: PaymentPayload): PaymentPayload {
  const payload = payment.payload as { signature: string };
  const v = Number.parseInt(payload.signature.slice(-2), 16);
  const signature = `${payload.signature.slice(0, -2)}${(v - 27).toString(16).padStart(2, "0")}`;
  return { ...payment, payload: { ...payload, signature } };
}

describe("x402 settlement under faults (real processes)", () => {
  // The stack's own origin shares the database; its tracker is slowed right down so that the
  // origins each test starts are the ones that finish (or fail to finish) the settlement. A
  // presentation of a payment another holds waits 1 s beyond the receipt wait, not 5, in the
  // origins the tests start: those that wait out that hold wait 4 s less.
  const stack = useMoneyStack(
    {
      x402: { amountUnits: AMOUNT, payTo },
      tracker: { periodMs: 3_600_000 },
      x402HoldBeyondReceiptMs: 1_000,
    },
    { timeoutMs: 120_000 },
  );

  const settlementOf = async (payer: Address) => {
    const rows = await queryRows<{ status: string; tx_hash: string | null }>(
      stack.db.handle.db,
      sql`select status, tx_hash from x402_settlements where payer = ${payer.toLowerCase()}`,
    );
    return rows;
  };
  const payToBalance = () => publicClientFor(stack.devnet.url).getBalance({ address: payTo });

  it("settles once when the origin is SIGKILLed after the settle broadcast: the restarted origin resolves it to settled", async () => {
    const payer = await fundedPayer(stack.devnet.url);
    const doomed = await spawnOrigin({
      entry: "testing/money-crash-origin.ts",
      // A 1 s chain timeout makes its broadcast lease 3 s, not 15: the next origin takes over after it.
      env: {
        ...stack.processEnv({ CHAIN_RPC_TIMEOUT_MS: "1000" }),
        MONEY_CRASH_AT: "settle_after_broadcast",
      },
    });
    const demo = `${doomed.base}/x402/demo`;
    const signature = paymentHeader(await envelope(demo, payer));
    const balanceBefore = await payToBalance();
    await expect(pay(demo, signature)).rejects.toThrow();
    expect(await doomed.exited).toBe("SIGKILL");
    // Claimed, signed, stored and broadcast; nothing recorded after the broadcast: still `claimed`,
    // naming its transaction.
    const [left] = await settlementOf(payer.address);
    expect(left).toMatchObject({ status: "claimed", tx_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    const transaction = left!.tx_hash!;

    // A restarted origin's tracker finds the receipt and settles it; nothing is signed again. Its
    // grace for a transaction stored but never recorded as broadcast is 1 s, not 5: it sends it
    // again as soon as the dead origin's broadcast lease (3 s) has run out.
    const restarted = await stack.startOrigin({}, { periodMs: 100, signedGraceMs: 1_000 });
    await expect
      .poll(() => settlementOf(payer.address), { timeout: 60_000, interval: 100 })
      .toEqual([{ status: "settled", tx_hash: transaction }]);
    try {
      // The same payment presented again: the dead origin answered nothing, so the one paid
      // answer the settlement owes from the commit that stored it was never taken, and this
      // presentation is it; any later one is told of the one transaction. Mutation: storing the
      // settlement without its paid answer (settle.ts storeStatement) answers it 402 nonce used: paid,
      // and nothing delivered.
      await expectRetryPaidOnce(`${restarted.base}/x402/demo`, signature, {
        devnetUrl: stack.devnet.url,
        payer: payer.address,
        transaction,
      });
      expect((await payToBalance()) - balanceBefore).toBe(AMOUNT * WEI_PER_UNIT);
    } finally {
      await restarted.close();
    }
  }, 120_000);

  it("never takes over a claim whose settlement is stored but not yet mined once its lease has run out: presented again, no second settler transaction", async () => {
    // Mutation: settle.ts claimStatement without `x402_settlements.tx_id is null` in its
    // take-over condition signs the payment a second time: two settler transactions carry it.
    const payer = await fundedPayer(stack.devnet.url);
    const doomed = await spawnOrigin({
      entry: "testing/money-crash-origin.ts",
      // A 1 s chain timeout makes its broadcast lease 3 s, not 15 (as above).
      env: { ...stack.processEnv({ CHAIN_RPC_TIMEOUT_MS: "1000" }), MONEY_CRASH_AT: "after_signed" },
    });
    const payment = await envelope(`${doomed.base}/x402/demo`, payer);
    const signature = paymentHeader(payment);
    const nonce = (payment.payload as { authorization: { nonce: string } }).authorization.nonce.toLowerCase();
    /** Settler transactions stored for this payment: its nonce is in their calldata. */
    const settlerTransactions = async () =>
      (
        await queryRows<{ tx_hash: string }>(
          stack.db.handle.db,
          sql`select tx_hash from outgoing_transactions
              where purpose = 'settlement' and position(${nonce.slice(2)} in raw_tx) > 0`,
        )
      ).map((row) => row.tx_hash);
    // Claimed, signed and stored; the origin dies before the broadcast.
    await expect(pay(`${doomed.base}/x402/demo`, signature)).rejects.toThrow();
    expect(await doomed.exited).toBe("SIGKILL");
    const [left] = await settlementOf(payer.address);
    expect(left).toMatchObject({ status: "claimed", tx_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    const transaction = left!.tx_hash!;
    expect(await settlerTransactions()).toEqual([transaction]);
    // Its claim's lease runs out (as 30 s after the claim), the transaction still unmined.
    await stack.db.handle.db.execute(
      sql`update x402_settlements set claimed_until = now() - interval '1 second'
          where payer = ${payer.address.toLowerCase()}`,
    );

    // Presented again at an origin whose tracker sends what was stored once the dead origin's
    // broadcast lease (3 s from the storing) has run out, its grace for a transaction stored and
    // never broadcast 2 s, not 5: told of the original.
    const restarted = await stack.startOrigin({}, { periodMs: 100, signedGraceMs: 2_000 });
    try {
      const again = await pay(`${restarted.base}/x402/demo`, signature);
      expect(again.response).toMatchObject({ transaction });
      await expect
        .poll(() => settlementOf(payer.address), { timeout: 60_000, interval: 100 })
        .toEqual([{ status: "settled", tx_hash: transaction }]);
      expect(await settlerTransactions()).toEqual([transaction]);
      expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
    } finally {
      await restarted.close();
    }
  }, 120_000);

  it("owes the retry a pending answer asked for when the first presentation died: presented again while the dead origin's settlement waits, pending; once settled, that retry is paid and the next told the nonce is used", async () => {
    // The payer's first answer was lost to a crash; its second presentation waits on the dead
    // origin's stored settlement and is answered settlement_pending, which asks for the same
    // payment again. Mutation: neither storing the settlement owing its paid answer (settle.ts
    // storeStatement) nor owing it where a held presentation is answered pending
    // (earlier-presentation.ts) answers the retry 402 nonce used.
    const payer = await fundedPayer(stack.devnet.url);
    const doomed = await spawnOrigin({
      entry: "testing/money-crash-origin.ts",
      env: { ...stack.processEnv({ CHAIN_RPC_TIMEOUT_MS: "1000" }), MONEY_CRASH_AT: "after_signed" },
    });
    const signature = paymentHeader(await envelope(`${doomed.base}/x402/demo`, payer));
    await expect(pay(`${doomed.base}/x402/demo`, signature)).rejects.toThrow();
    expect(await doomed.exited).toBe("SIGKILL");
    const [left] = await settlementOf(payer.address);
    const transaction = left!.tx_hash!;
    // An origin whose tracker does not come round again soon: the presentation waits out its hold.
    const waiting = await stack.startOrigin(
      { AGENT_X402_RECEIPT_TIMEOUT_MS: "1000" },
      { periodMs: 3_600_000 },
    );
    let finisher: Awaited<ReturnType<typeof stack.startOrigin>> | undefined;
    try {
      const demo = `${waiting.base}/x402/demo`;
      expect(await pay(demo, signature)).toMatchObject({
        status: 402,
        body: { error: X402_REASONS.settlementPending },
        response: { success: false, transaction },
      });
      finisher = await stack.startOrigin({}, { periodMs: 100 });
      await expect
        .poll(() => settlementOf(payer.address), { timeout: 60_000, interval: 100 })
        .toEqual([{ status: "settled", tx_hash: transaction }]);
      expect(await pay(demo, signature)).toMatchObject({
        status: 200,
        response: { success: true, transaction },
      });
      expect(await pay(demo, signature)).toMatchObject({
        status: 402,
        body: { error: X402_REASONS.nonceUsed },
        response: { success: false, transaction },
      });
      expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
    } finally {
      await finisher?.close();
      await waiting.close();
    }
  }, 120_000);

  it("a payer that leaves while its settlement is mined takes no paid answer: its retry of the same payment is paid, once, and the next told the nonce is used", async () => {
    // A client's timeout (or a dropped connection) while the settle waits for its receipt: before
    // the fix the settle took the one paid answer for the answer nobody read, and the payer's retry
    // was told the nonce is used: paid, and nothing delivered. Mutation: demo.ts not giving the
    // answer back answers the retry 402 invalid_exact_evm_nonce_already_used.
    const origin = await stack.startOrigin({ AGENT_X402_RECEIPT_TIMEOUT_MS: "30000" }, { periodMs: 100 });
    try {
      const balanceBefore = await payToBalance();
      await payerLeavesWhileMined({
        demo: `${origin.base}/x402/demo`,
        devnetUrl: stack.devnet.url,
        db: stack.db.handle.db,
      });
      expect((await payToBalance()) - balanceBefore).toBe(AMOUNT * WEI_PER_UNIT);
    } finally {
      await origin.close();
    }
  }, 120_000);

  it("a retry of a pending payment whose payer leaves while it waits for the settlement takes no paid answer: the next retry is paid, once", async () => {
    // The first presentation is answered settlement_pending (its receipt held back past a short
    // wait); the retry it asked for waits for that settlement, and its caller leaves meanwhile.
    // Mutation: demo.ts not giving back the answer the left retry took answers the next retry 402
    // invalid_exact_evm_nonce_already_used: paid, and nothing delivered.
    const origin = await stack.startOrigin({ AGENT_X402_RECEIPT_TIMEOUT_MS: "1500" }, { periodMs: 100 });
    try {
      await retryLeavesWhilePending({
        demo: `${origin.base}/x402/demo`,
        devnetUrl: stack.devnet.url,
        db: stack.db.handle.db,
      });
    } finally {
      await origin.close();
    }
  }, 120_000);

  it("takes over a claim abandoned before anything was signed once its lease has run out, and settles the payment once", async () => {
    // The row a settle leaves when it dies between its claim and its signing (a claim with no
    // transaction), its lease over. Mutation: a claim never taken over answers this payment as a
    // duplicate of the dead one (402 settlement_pending), for good.
    const payer = await fundedPayer(stack.devnet.url);
    const demo = `${stack.origin.base}/x402/demo`;
    const payment = await envelope(demo, payer);
    const { authorization, signature } = payment.payload as {
      authorization: Record<string, string>;
      signature: string;
    };
    await stack.db.handle.db.execute(sql`insert into x402_settlements (payer, nonce, pay_to, amount_units,
        requirement_hash, payload_hash, valid_after, valid_before, signature, claimed_until)
      values (${payer.address.toLowerCase()}, ${authorization.nonce!.toLowerCase()}, ${payTo}, ${AMOUNT.toString()},
        ${"00".repeat(32)}, ${"00".repeat(32)}, ${authorization.validAfter!}, ${authorization.validBefore!},
        ${signature.toLowerCase()}, now() - interval '1 second')`);
    const before = await payToBalance();
    const paid = await pay(demo, paymentHeader(payment));
    expect(paid.status, JSON.stringify(paid.body)).toBe(200);
    expect(await settlementOf(payer.address)).toMatchObject([{ status: "settled" }]);
    expect((await payToBalance()) - before).toBe(AMOUNT * WEI_PER_UNIT);
    expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
  }, 60_000);

  it("takes over an abandoned claim of another authorization of the same nonce with the terms of the one it settles: the row and its reservation hold what was paid", async () => {
    // Its payer signed two authorizations with one nonce; the first's settle died between its claim
    // and its signing. Mutation: a take-over that keeps the dead claim's terms records another
    // recipient, amount, validity and signature than the transaction moved, and reserves that.
    const payer = await fundedPayer(stack.devnet.url);
    const demo = `${stack.origin.base}/x402/demo`;
    const payment = await envelope(demo, payer);
    const { authorization, signature } = payment.payload as {
      authorization: Record<string, string>;
      signature: string;
    };
    const payerKey = payer.address.toLowerCase();
    const [dead] = await queryRows<{ id: string }>(
      stack.db.handle.db,
      sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
            valid_after, valid_before, signature, claimed_until)
          values (${payerKey}, ${authorization.nonce!.toLowerCase()}, ${newAccount().address.toLowerCase()},
            ${(AMOUNT * 3n).toString()}, ${"00".repeat(32)}, ${"00".repeat(32)}, 0,
            ${(BigInt(authorization.validBefore!) + 600n).toString()}, ${`0x${"ab".repeat(65)}`},
            now() - interval '1 second')
          returning id`,
    );
    await stack.db.handle.db.execute(
      sql`insert into x402_reservations (settlement_id, payer, amount_units, valid_before)
          values (${dead!.id}, ${payerKey}, ${(AMOUNT * 3n).toString()},
            ${(BigInt(authorization.validBefore!) + 600n).toString()})`,
    );
    const paid = await pay(demo, paymentHeader(payment));
    expect(paid.status, JSON.stringify(paid.body)).toBe(200);
    const [row] = await queryRows(
      stack.db.handle.db,
      sql`select status, pay_to, amount_units::text as amount_units, valid_after::text as valid_after,
            valid_before::text as valid_before, signature, payload_hash from x402_settlements where id = ${dead!.id}`,
    );
    expect(row).toEqual({
      status: "settled",
      pay_to: payTo,
      amount_units: AMOUNT.toString(),
      valid_after: authorization.validAfter,
      valid_before: authorization.validBefore,
      signature: signature.toLowerCase(),
      payload_hash: sha256(payment.payload),
    });
    expect(
      await queryRows(
        stack.db.handle.db,
        sql`select amount_units::text as amount_units, valid_before::text as valid_before
            from x402_reservations where settlement_id = ${dead!.id}`,
      ),
    ).toEqual([{ amount_units: AMOUNT.toString(), valid_before: authorization.validBefore }]);
    expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
  }, 60_000);

  describe("a chain that stops answering after it accepted the settlement", () => {
    const proxy = useRpcCutProxy(() => stack.devnet.url);

    it("answers 402 settlement_pending naming the transaction, never 200, never settles twice; the tracker settles it once the chain is back", async () => {
      // A short receipt wait, so the cut line outlasts it; the origin reaches the chain only through the proxy.
      const origin = await stack.startOrigin(
        { CHAIN_RPC_URL: proxy.url, AGENT_X402_RECEIPT_TIMEOUT_MS: "1000", CHAIN_RPC_TIMEOUT_MS: "1000" },
        { periodMs: 100 },
      );
      const demo = `${origin.base}/x402/demo`;
      try {
        const payer = await fundedPayer(stack.devnet.url);
        const signature = paymentHeader(await envelope(demo, payer));
        const cut = proxy.cutAfter("eth_sendRawTransaction");
        const answers: PaidAnswer[] = [await pay(demo, signature)];
        await cut;
        const first = answers[0]!;
        expect(first.status).toBe(402);
        expect(first.body.error).toBe(X402_REASONS.settlementPending);
        expect(first.response).toMatchObject({
          success: false,
          errorReason: X402_REASONS.settlementPending,
          transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
        });
        const transaction = first.response!.transaction as string;
        expect(await settlementOf(payer.address)).toEqual([{ status: "submitted", tx_hash: transaction }]);

        // Presented again while the line is still cut: pending, the same transaction, nothing new.
        answers.push(await pay(demo, signature));
        expect(answers[1]).toMatchObject({
          status: 402,
          body: { error: X402_REASONS.settlementPending },
          response: { success: false, transaction },
        });

        // The chain is back: the tracker reads the receipt and settles it.
        proxy.restore();
        await expect
          .poll(() => settlementOf(payer.address), { timeout: 60_000, interval: 100 })
          .toEqual([{ status: "settled", tx_hash: transaction }]);
        // Presented again once settled: paid, by the same transaction (settlement_pending meant
        // "retry the same payment"); the retry it owed taken, once more is told the nonce is used.
        answers.push(await pay(demo, signature));
        expect(answers[2]).toMatchObject({ status: 200, response: { success: true, transaction } });
        answers.push(await pay(demo, signature));
        expect(answers[3]).toMatchObject({
          status: 402,
          body: { error: X402_REASONS.nonceUsed },
          response: { success: false, transaction },
        });
        expect(answers.map((answer) => answer.status)).toEqual([402, 402, 200, 402]);
        expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
      } finally {
        proxy.restore();
        await origin.close();
      }
    }, 120_000);
  });

  describe("a settlement signed but not yet on chain", () => {
    const proxy = useRpcCutProxy(() => stack.devnet.url);

    it("refuses at /verify a payment already claimed and signed but not yet mined: nonce already used", async () => {
      // Mutation: /verify not asking whether the pair is claimed finds the authorization unused on
      // chain and the balance (twice the amount) enough, and answers isValid: true. Presented as
      // another payload of the same (from, nonce), its signature's v as 0/1 instead of 27/28: the
      // same payload again is the retry its pending answer asked for, which verify calls valid
      // (settlement-status.int.test.ts).
      // Its tracker sends a withheld broadcast again 1 s after it, not 5.
      const origin = await stack.startOrigin(
        { CHAIN_RPC_URL: proxy.url, AGENT_X402_RECEIPT_TIMEOUT_MS: "1000", CHAIN_RPC_TIMEOUT_MS: "1000" },
        { periodMs: 100, signedGraceMs: 1_000 },
      );
      try {
        const payer = await fundedPayer(stack.devnet.url, 2n * AMOUNT);
        const demo = `${origin.base}/x402/demo`;
        const payment = await envelope(demo, payer);
        proxy.withhold("eth_sendRawTransaction");
        const pending = await pay(demo, paymentHeader(payment));
        expect(pending).toMatchObject({ status: 402, body: { error: X402_REASONS.settlementPending } });
        // Its broadcast got no answer: it may have reached a node, so it is in flight.
        expect(await settlementOf(payer.address)).toMatchObject([{ status: "submitted" }]);
        const verified = await fetch(`${stack.origin.base}/x402/facilitator/verify`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            x402Version: 2,
            paymentPayload: reencoded(payment),
            paymentRequirements: payment.accepted,
          }),
        });
        expect(await verified.json()).toMatchObject({
          isValid: false,
          invalidReason: X402_REASONS.nonceUsed,
        });
        proxy.withhold(undefined);
        await expect
          .poll(() => settlementOf(payer.address), { timeout: 60_000, interval: 100 })
          .toMatchObject([{ status: "settled" }]);
        expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
      } finally {
        proxy.withhold(undefined);
        await origin.close();
      }
    }, 120_000);

    it("holds a settlement signed but not yet on chain against its payer's balance: verify and settle refuse a second one the balance cannot also cover", async () => {
      // Its tracker sends a withheld broadcast again 1 s after it, not 5.
      const origin = await stack.startOrigin(
        { CHAIN_RPC_URL: proxy.url, AGENT_X402_RECEIPT_TIMEOUT_MS: "1000", CHAIN_RPC_TIMEOUT_MS: "1000" },
        { periodMs: 100, signedGraceMs: 1_000 },
      );
      try {
        // A balance that covers one payment.
        const payer = await fundedPayer(stack.devnet.url, AMOUNT);
        const balance = () => publicClientFor(stack.devnet.url).getBalance({ address: payer.address });
        const demo = `${origin.base}/x402/demo`;
        const [first, second] = [await envelope(demo, payer), await envelope(demo, payer)];

        // Signed and stored, but its broadcast never reaches the chain: the balance still shows it all.
        proxy.withhold("eth_sendRawTransaction");
        const pending = await pay(demo, paymentHeader(first));
        expect(pending).toMatchObject({ status: 402, body: { error: X402_REASONS.settlementPending } });
        const transaction = pending.response!.transaction as string;
        expect(await settlementOf(payer.address)).toEqual([{ status: "submitted", tx_hash: transaction }]);
        expect(await balance()).toBe(AMOUNT * WEI_PER_UNIT);

        // The second payment, at the stack's own origin, whose line to the chain is whole.
        const verified = await fetch(`${stack.origin.base}/x402/facilitator/verify`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            x402Version: 2,
            paymentPayload: second,
            paymentRequirements: second.accepted,
          }),
        });
        expect(await verified.json()).toMatchObject({
          isValid: false,
          invalidReason: X402_REASONS.insufficientBalance,
        });
        const refused = await pay(`${stack.origin.base}/x402/demo`, paymentHeader(second));
        expect(refused).toMatchObject({ status: 402, body: { error: X402_REASONS.insufficientBalance } });

        // The first reaches the chain and settles; the second was never signed.
        proxy.withhold(undefined);
        await expect
          .poll(() => settlementOf(payer.address), { timeout: 60_000, interval: 100 })
          .toEqual([{ status: "settled", tx_hash: transaction }]);
        expect(await balance()).toBe(0n);
        expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
      } finally {
        proxy.withhold(undefined);
        await origin.close();
      }
    }, 120_000);
  });

  describe("a settlement mined one block after the balance read", () => {
    // The first payment's origin reaches the chain through a line cut right after its broadcast,
    // so nothing records that settlement's receipt; the second payment's origin reads the chain
    // through a pass-through that lets the devnet mine one block between that origin's balance read
    // and its next call. The devnet holds its blocks meanwhile (dev_setAutomine false).
    const cutLine = useRpcCutProxy(() => stack.devnet.url);
    const afterRead = useFixture(
      "after-read pass-through",
      () => startRpcAfterReadProxy(stack.devnet.url),
      (started) => started.close(),
    );

    it("is not counted as already in that balance: of two payments of one payer whose balance covers one, the second is not signed", async () => {
      // Mutation: reservations.ts counting a settlement mined in the block after the balance read
      // as in it (`receipt.blockNumber <= balanceBlock + 1n`) signs the second payment too.
      const first = await stack.startOrigin(
        { CHAIN_RPC_URL: cutLine.url, AGENT_X402_RECEIPT_TIMEOUT_MS: "2000", CHAIN_RPC_TIMEOUT_MS: "1000" },
        { periodMs: 3_600_000 },
      );
      const second = await stack.startOrigin({ CHAIN_RPC_URL: afterRead.url }, { periodMs: 3_600_000 });
      const devnet = stack.devnet.url;
      try {
        const payer = await fundedPayer(devnet, AMOUNT);
        const [a, b] = [
          await envelope(`${first.base}/x402/demo`, payer),
          await envelope(`${second.base}/x402/demo`, payer),
        ];
        const nonceOf = (payment: typeof a) =>
          (payment.payload as { authorization: { nonce: string } }).authorization.nonce
            .toLowerCase()
            .slice(2);
        const settlerTransactions = async (payment: typeof a) =>
          queryRows<{ tx_hash: string }>(
            stack.db.handle.db,
            sql`select tx_hash from outgoing_transactions
                where purpose = 'settlement' and position(${nonceOf(payment)} in raw_tx) > 0`,
          );
        expect(await rpc(devnet, "dev_setAutomine", [false])).toMatchObject({ result: true });
        try {
          // The first: signed, stored and broadcast; it waits in the devnet's pool, unmined, and
          // its origin loses the line right after the broadcast.
          const cut = cutLine.cutAfter("eth_sendRawTransaction");
          const paying = pay(`${first.base}/x402/demo`, paymentHeader(a));
          await cut;
          const [pending] = await settlerTransactions(a);
          expect(pending).toBeDefined();
          // The second: its batch reads the balance (the first's amount still in it) at block N;
          // then the devnet mines the first in block N + 1, before the reservation is read.
          const payerAddress = payer.address.toLowerCase();
          const mined = afterRead.afterNext(
            (requests) =>
              requests.some((r) => r.method === "eth_blockNumber") &&
              requests.some(
                (r) => r.method === "eth_getBalance" && String(r.params?.[0]).toLowerCase() === payerAddress,
              ),
            async () => {
              expect(await rpc(devnet, "dev_mine", [])).toMatchObject({ result: true });
            },
          );
          const refused = await pay(`${second.base}/x402/demo`, paymentHeader(b));
          await mined;
          expect(refused).toMatchObject({ status: 402, body: { error: X402_REASONS.insufficientBalance } });
          expect(await settlerTransactions(b)).toEqual([]);
          expect((await paying).status).toBe(402); // pending: its line was cut
        } finally {
          await rpc(devnet, "dev_setAutomine", [true]);
          await rpc(devnet, "dev_mine", []);
          cutLine.restore();
        }
        const receipt = await publicClientFor(devnet).getTransactionReceipt({
          hash: (await settlerTransactions(a))[0]!.tx_hash as `0x${string}`,
        });
        expect(receipt.status).toBe("success");
        expect(await publicClientFor(devnet).getBalance({ address: payer.address })).toBe(0n);
        expect(await authorizationUsedCount(devnet, payer.address)).toBe(1);
      } finally {
        await first.close();
        await second.close();
      }
    }, 120_000);
  });
});
