import { HTTPFacilitatorClient } from "@x402/core/server";
import type { PaymentPayload } from "@x402/core/types";
import { SettleError } from "@x402/core/types";
import { generatePaymentId } from "@x402/extensions/payment-identifier";
import { sql } from "drizzle-orm";
import type { Address, Hex, PrivateKeyAccount } from "viem";
import { afterAll, beforeAll, expect, it } from "vitest";
import { fund, newAccount, publicClientFor, walletClientFor } from "../../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../../shared/constants.ts";
import { startCountingPassThrough } from "../../../testing/counting-pass-through.ts";
import { sharedResponseChecker } from "../../../testing/openapi-check.ts";
import type { TestOrigin } from "../../../testing/origin.ts";
import { spawnOrigin } from "../../../testing/origin-process.ts";
import { type RpcRefusalProxy, startRpcRefusalProxy } from "../../../testing/rpc-refusal-proxy.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { frontRunNextSettlement, relayerOf } from "../../../testing/x402-front-run.ts";
import {
  envelope,
  fundedPayer,
  identifiedEnvelope,
  pay,
  paymentHeader,
} from "../../../testing/x402-payer.ts";
import { authorizationUsedCount } from "../../../testing/x402-settlements.ts";
import { queryRows } from "../../db/client.ts";
import { X402_REASONS } from "../reasons.ts";
import { REVERT_GUARD } from "./revert-guard.ts";

// Anyone holding a payer's signed authorization can relay it: the seller, a watcher of the
// mempool, a malicious relayer. Here another relayer's transaction uses the authorization just
// before the settler's broadcast (the RPC proxy runs that relayer's own transaction against the
// devnet in that instant: no fake), so the settlement reverts while the seller was paid.
const AMOUNT = 10_000n;
const PAY_TO = newAccount().address.toLowerCase() as Address;
// The stack's own origin (straight to the devnet, never through the proxy) sends again a settlement
// stored and never recorded as broadcast 1 s after it, not 5: once a crashed origin's broadcast
// lease (3 s at its 1 s chain timeout) has run out.
const stack = useMoneyStack(
  { x402: { amountUnits: AMOUNT, payTo: PAY_TO }, tracker: { signedGraceMs: 1_000 } },
  { timeoutMs: 180_000 },
);
const db = () => stack.db.handle.db;
const demo = () => `${stack.origin.base}/x402/demo`;

let proxy: RpcRefusalProxy;
let origin: TestOrigin;
beforeAll(async () => {
  proxy = await startRpcRefusalProxy(stack.devnet.url);
  origin = await stack.startOrigin({}, undefined, proxy.url);
}, 60_000);
afterAll(async () => {
  await proxy?.close();
});

async function post(route: "verify" | "settle", payment: PaymentPayload, base = origin.base) {
  const response = await fetch(`${base}/x402/facilitator/${route}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ x402Version: 2, paymentPayload: payment, paymentRequirements: payment.accepted }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** `payment` settled through the origin while another relayer front-runs it: the settle's answer. */
async function settleFrontRun(payment: PaymentPayload) {
  const frontRun = await frontRunNextSettlement(proxy, stack.devnet.url, payment);
  const answer = await post("settle", payment);
  await frontRun.done;
  return answer;
}

/** A payment of `payer`'s signed by @x402/evm's own client, carrying payment id `id`. */
const identified = (payer: PrivateKeyAccount, id: string) => identifiedEnvelope(demo(), payer, id);

/** The payment's settlement as its status route answers it (docs/x402.md#settlement-status), checked against the served document. */
async function statusOf(payment: PaymentPayload, base = origin.base) {
  const { from, nonce } = authorizationOf(payment);
  const url = `${base}/x402/facilitator/settlements/${from.toLowerCase()}/${nonce.toLowerCase()}`;
  const response = await fetch(url);
  const body = (await response.json()) as Record<string, unknown>;
  expect(
    sharedResponseChecker().check({ method: "GET", url, contentType: "application/json", status: 200, body }),
  ).toEqual([]);
  return { status: response.status, body };
}

const authorizationOf = (payment: PaymentPayload) =>
  (payment.payload as { authorization: { from: Address; nonce: Hex } }).authorization;

/** The payer's settlement events, oldest first. */
const settlementEvents = (payer: PrivateKeyAccount) =>
  queryRows<{ type: string; data: Record<string, unknown> }>(
    db(),
    sql`select type, data from events
        where type like 'x402.settlement.%' and data->>'payer' = ${payer.address.toLowerCase()} order by id`,
  );

const revertsCounted = async (payer: PrivateKeyAccount) =>
  (
    await queryRows<{ n: number }>(
      db(),
      sql`select count(*)::int as n from x402_reverts where payer = ${payer.address.toLowerCase()}`,
    )
  )[0]!.n;

it("settlements reverted because another relayer used their authorizations first do not hold the payer or its address: the seller was paid each time, and the next payment verifies and settles", async () => {
  // Mutation: counting every reverted settlement against its payer and address (as the guard did)
  // refuses the fourth payment 429 invalid_exact_evm_too_many_reverts, from verify and settle.
  const payer = await fundedPayer(stack.devnet.url, BigInt(REVERT_GUARD.reverts + 2) * AMOUNT);
  for (let i = 0; i < REVERT_GUARD.reverts; i++) {
    const answer = await settleFrontRun(await envelope(demo(), payer));
    expect(answer).toMatchObject({
      status: 400,
      body: { success: false, errorReason: X402_REASONS.transactionFailed },
    });
    expect(answer.body.transaction).toMatch(/^0x[0-9a-f]{64}$/);
  }
  // Each authorization paid the seller, through the other relayer's transaction.
  expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(REVERT_GUARD.reverts);

  const next = await envelope(demo(), payer);
  expect(await post("verify", next)).toMatchObject({ status: 200, body: { isValid: true } });
  const settled = await post("settle", next);
  expect(settled).toMatchObject({ status: 200, body: { success: true } });
  expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(REVERT_GUARD.reverts + 1);
  expect(await revertsCounted(payer)).toBe(0);
}, 120_000);

it("verify agrees with settle on a fresh authorization under a payment id whose settlement another relayer front-ran: not valid, transaction_failed, as settle answers it; nothing paid again", async () => {
  // Mutation: verify taking every reverted bound settlement as leaving the id free (as it did)
  // answers the fresh authorization isValid: true, which settle then refuses.
  const payer = await fundedPayer(stack.devnet.url, 3n * AMOUNT);
  const id = generatePaymentId();
  const first = await identified(payer, id);
  const answer = await settleFrontRun(first);
  expect(answer.body).toMatchObject({ success: false, errorReason: X402_REASONS.transactionFailed });

  const fresh = await identified(payer, id);
  expect(await post("verify", fresh)).toMatchObject({
    status: 200,
    body: { isValid: false, invalidReason: X402_REASONS.transactionFailed },
  });
  // The official client reads verify's answer as settle's: not valid, for the same reason.
  const verified = await new HTTPFacilitatorClient({ url: `${origin.base}/x402/facilitator` }).verify(
    fresh,
    fresh.accepted,
  );
  expect(verified).toMatchObject({ isValid: false, invalidReason: X402_REASONS.transactionFailed });
  // Answered from the settlement under the id, which paid the payee by the other transaction.
  expect(await post("settle", fresh)).toMatchObject({
    status: 400,
    body: {
      success: false,
      errorReason: X402_REASONS.transactionFailed,
      transaction: answer.body.transaction,
      errorMessage: expect.stringContaining("the payment reached its payee by that transaction"),
    },
  });
  // One payment for the one request: the relayer's.
  expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
}, 60_000);

it("fresh authorizations under a payment id whose settlement another relayer front-ran are answered from what that settlement keeps: the chain is not read again on each presentation, the answer the same", async () => {
  // Mutation: bindPaymentId, or verify's paymentIdStanding, asking the chain on every presentation
  // (as they did), though the settlement already says its authorization was used, reads its
  // storage word once more for each.
  const counting = await startCountingPassThrough(stack.devnet.url);
  const counted = await stack.startOrigin({}, undefined, counting.url);
  try {
    const payer = await fundedPayer(stack.devnet.url, 4n * AMOUNT);
    const id = generatePaymentId();
    const answer = await settleFrontRun(await identified(payer, id));
    expect(answer.body).toMatchObject({ success: false, errorReason: X402_REASONS.transactionFailed });
    const fromTheFrontRun = {
      status: 400,
      body: {
        success: false,
        errorReason: X402_REASONS.transactionFailed,
        transaction: answer.body.transaction,
        errorMessage: expect.stringContaining("the payment reached its payee by that transaction"),
      },
    };
    // The first asks the chain if nobody kept the answer yet; from then on the settlement has it.
    expect(await post("settle", await identified(payer, id), counted.base)).toMatchObject(fromTheFrontRun);
    const [kept] = await queryRows<{ authorization_used_elsewhere: boolean | null }>(
      db(),
      sql`select authorization_used_elsewhere from x402_settlements
          where payer = ${payer.address.toLowerCase()} and payment_id = ${id}`,
    );
    expect(kept).toEqual({ authorization_used_elsewhere: true });
    const storageReads = () => counting.callsOf("eth_getStorageAt");
    const before = storageReads();
    for (let i = 0; i < 2; i++) {
      const fresh = await identified(payer, id);
      // A seller that verifies first (as @x402/core's resource server does) is answered as settle
      // will answer it, from the same kept answer.
      expect(await post("verify", fresh, counted.base)).toMatchObject({
        status: 200,
        body: { isValid: false, invalidReason: X402_REASONS.transactionFailed },
      });
      expect(await post("settle", fresh, counted.base)).toMatchObject(fromTheFrontRun);
    }
    expect(storageReads()).toBe(before);
    // One payment for the one request: the relayer's.
    expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
  } finally {
    await counted.close();
    await counting.close();
  }
}, 60_000);

it("a settlement under a payment id that reverted because its payer moved its balance away leaves the id free: a fresh authorization under it verifies and settles, and the revert is counted", async () => {
  // The counterpart of the front-run: the authorization stays unused on chain (the revert undid
  // it), so the chain read frees the id and the revert stays the payer's.
  const payer = await fundedPayer(stack.devnet.url, 3n * AMOUNT);
  const id = generatePaymentId();
  const first = await identified(payer, id);
  const chain = publicClientFor(stack.devnet.url);
  const drained = proxy.beforeNextSend(async () => {
    const balance = await chain.getBalance({ address: payer.address });
    const tip = 1_000_000_000n;
    const maxFeePerGas = 2n * (await chain.getGasPrice()) + tip;
    const hash = await walletClientFor(stack.devnet.url, payer).sendTransaction({
      to: newAccount().address,
      value: balance - 21_000n * maxFeePerGas,
      gas: 21_000n,
      maxFeePerGas,
      maxPriorityFeePerGas: tip,
    });
    await chain.waitForTransactionReceipt({ hash });
  });
  const answer = await post("settle", first);
  await drained;
  expect(answer.body).toMatchObject({ success: false, errorReason: X402_REASONS.transactionFailed });
  expect(await revertsCounted(payer)).toBe(1);
  // Its status says so: nothing moved, and the authorization is unused.
  expect((await statusOf(first)).body).toMatchObject({
    status: "reverted",
    authorization_used_elsewhere: false,
  });

  await fund(stack.devnet.url, payer.address, 3n * AMOUNT * WEI_PER_UNIT);
  const fresh = await identified(payer, id);
  expect(await post("verify", fresh)).toMatchObject({ status: 200, body: { isValid: true } });
  expect(await post("settle", fresh)).toMatchObject({ status: 200, body: { success: true } });
  expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
}, 60_000);

it("the settle answer of a settlement another relayer front-ran tells the seller, through the official client, that the payment reached it by that other transaction", async () => {
  // Mutation: answering it as any revert (as it did) leaves the seller told only that the
  // transaction failed, as if the payer had not paid.
  const payer = await fundedPayer(stack.devnet.url, 2n * AMOUNT);
  const payment = await envelope(demo(), payer);
  const frontRun = await frontRunNextSettlement(proxy, stack.devnet.url, payment);
  const client = new HTTPFacilitatorClient({ url: `${origin.base}/x402/facilitator` });
  const refused = await client.settle(payment, payment.accepted).catch((error: unknown) => error);
  await frontRun.done;
  expect(refused).toBeInstanceOf(SettleError);
  expect(refused).toMatchObject({ statusCode: 400, errorReason: X402_REASONS.transactionFailed });
  const { transaction, errorMessage } = refused as SettleError;
  expect(transaction).toMatch(/^0x[0-9a-f]{64}$/);
  expect(errorMessage).toBe(
    `transaction ${transaction} moved nothing: another transaction used this authorization, and the payment reached its payee by that transaction, not by this settlement`,
  );
  expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
}, 60_000);

it("the status of a settlement another relayer front-ran says its authorization was used elsewhere, by either key: the payee was paid; marking it writes no second reverted event but one x402.settlement.used_elsewhere", async () => {
  // Mutation: the status view without authorization_used_elsewhere (as it was) says only
  // `reverted`, as if the payer had not paid.
  const payer = await fundedPayer(stack.devnet.url, 2n * AMOUNT);
  const payment = await envelope(demo(), payer);
  const answer = await settleFrontRun(payment);
  expect(answer.body).toMatchObject({ success: false, errorReason: X402_REASONS.transactionFailed });
  const transaction = answer.body.transaction as string;
  const status = await statusOf(payment);
  expect(status).toMatchObject({
    status: 200,
    body: {
      status: "reverted",
      transaction,
      reason: X402_REASONS.transactionFailed,
      authorization_used_elsewhere: true,
    },
  });
  const byHash = await fetch(`${origin.base}/x402/facilitator/settlements/tx/${transaction}`);
  expect(await byHash.json()).toEqual(status.body);
  expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
  // The reverted event was written as the settlement ended, before the chain was asked; learning
  // it later changes no status and writes no second one, but tells a subscriber once (migration 0045).
  const events = await settlementEvents(payer);
  expect(events.filter((event) => event.type === "x402.settlement.reverted")).toEqual([
    {
      type: "x402.settlement.reverted",
      data: { ...status.body, authorization_used_elsewhere: null },
    },
  ]);
  expect(events.filter((event) => event.type === "x402.settlement.used_elsewhere")).toEqual([
    { type: "x402.settlement.used_elsewhere", data: status.body },
  ]);
}, 60_000);

it("a front-run whose settle was answered 504 settlement_pending (its receipt late): the status then says reverted with the authorization used elsewhere, the retry is told the payment reached the payee by that other transaction, and nothing is paid twice", async () => {
  // An origin whose receipt wait ends before the settlement is mined: the proxy takes the settler's
  // broadcast and hands it to the devnet 5 s later, and meanwhile another relayer's transaction
  // uses the authorization.
  const late = await stack.startOrigin({ AGENT_X402_RECEIPT_TIMEOUT_MS: "1500" }, undefined, proxy.url);
  try {
    const payeeBefore = await publicClientFor(stack.devnet.url).getBalance({ address: PAY_TO });
    const payer = await fundedPayer(stack.devnet.url, 2n * AMOUNT);
    const payment = await envelope(demo(), payer);
    const { relay } = await relayerOf(stack.devnet.url, payment);
    proxy.delaySends(5_000);
    const pending = await post("settle", payment, late.base).finally(() => proxy.delaySends(undefined));
    expect(pending).toMatchObject({
      status: 504,
      body: { success: false, errorReason: X402_REASONS.settlementPending },
    });
    const transaction = pending.body.transaction as string;
    expect(transaction).toMatch(/^0x[0-9a-f]{64}$/);
    await relay();

    await expect
      .poll(async () => (await statusOf(payment, late.base)).body, { timeout: 30_000, interval: 200 })
      .toMatchObject({ status: "reverted", transaction, authorization_used_elsewhere: true });
    // The one retry the pending answer asked for is told the truth, by the same transaction.
    expect(await post("settle", payment, late.base)).toMatchObject({
      status: 400,
      body: {
        success: false,
        errorReason: X402_REASONS.transactionFailed,
        transaction,
        errorMessage: expect.stringContaining("the payment reached its payee by that transaction"),
      },
    });
    // One payment, the relayer's; not counted against the payer.
    expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
    expect((await publicClientFor(stack.devnet.url).getBalance({ address: PAY_TO })) - payeeBefore).toBe(
      AMOUNT * WEI_PER_UNIT,
    );
    await expect.poll(() => revertsCounted(payer), { timeout: 10_000, interval: 200 }).toBe(0);
  } finally {
    await late.close();
  }
}, 90_000);

it("a front-run recorded by another origin's tracker after the origin that broadcast it died is not counted against the payer: the next payment verifies and settles", async () => {
  // Mutation: the revert guard counting every recorded revert, asking the chain only through the
  // settle that waited for the receipt (as it did), refuses the next payment 429
  // invalid_exact_evm_too_many_reverts: nobody asked about these.
  const payer = await fundedPayer(stack.devnet.url, BigInt(REVERT_GUARD.reverts + 2) * AMOUNT);
  const payments: PaymentPayload[] = [];
  for (let i = 0; i < REVERT_GUARD.reverts; i++) {
    // It dies once the chain took its settlement (a 1 s chain timeout makes its broadcast lease 3 s).
    const doomed = await spawnOrigin({
      entry: "testing/money-crash-origin.ts",
      env: {
        ...stack.processEnv({ CHAIN_RPC_URL: proxy.url, CHAIN_RPC_TIMEOUT_MS: "1000" }),
        MONEY_CRASH_AT: "settle_after_broadcast",
      },
    });
    const payment = await envelope(`${doomed.base}/x402/demo`, payer);
    const frontRun = await frontRunNextSettlement(proxy, stack.devnet.url, payment);
    await expect(pay(`${doomed.base}/x402/demo`, paymentHeader(payment))).rejects.toThrow();
    await frontRun.done;
    expect(await doomed.exited).toBe("SIGKILL");
    payments.push(payment);
  }
  // The trackers of the origins left record each receipt: reverted, counted as it is recorded.
  const states = () =>
    queryRows<{ status: string }>(
      db(),
      sql`select status from x402_settlements where payer = ${payer.address.toLowerCase()}`,
    );
  await expect
    .poll(async () => (await states()).map((row) => row.status), { timeout: 60_000, interval: 200 })
    .toEqual(Array(REVERT_GUARD.reverts).fill("reverted"));
  expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(REVERT_GUARD.reverts);

  const next = await envelope(demo(), payer);
  expect(await post("verify", next)).toMatchObject({ status: 200, body: { isValid: true } });
  expect(await post("settle", next)).toMatchObject({ status: 200, body: { success: true } });
  expect(await revertsCounted(payer)).toBe(0);
  for (const payment of payments)
    expect((await statusOf(payment)).body).toMatchObject({
      status: "reverted",
      authorization_used_elsewhere: true,
    });
}, 150_000);
