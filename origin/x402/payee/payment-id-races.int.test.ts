import type { PaymentPayload } from "@x402/core/types";
import { generatePaymentId } from "@x402/extensions/payment-identifier";
import { sql } from "drizzle-orm";
import type { Address, PrivateKeyAccount } from "viem";
import { beforeAll, expect, it } from "vitest";
import { fund, newAccount } from "../../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../../shared/constants.ts";
import { sleep } from "../../../shared/sleep.ts";
import { type HeldLock, holdLock } from "../../../testing/held-lock.ts";
import { blockedBy } from "../../../testing/lock-waiters.ts";
import { startRpcRefusalProxy } from "../../../testing/rpc-refusal-proxy.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { frontRunNextSettlement } from "../../../testing/x402-front-run.ts";
import { envelope, fundedPayer, identifiedEnvelope } from "../../../testing/x402-payer.ts";
import { authorizationUsedCount, settlementRowCount } from "../../../testing/x402-settlements.ts";
import { queryRows } from "../../db/client.ts";
import { X402_REASONS } from "../reasons.ts";
import { paymentFingerprint } from "./payment-identifier.ts";

// docs/x402.md#payment-identifiers: one request under one payment id is paid once, however its
// presentations interleave. A presentation refused before signing lets the id go, and a binding
// left unclaimed past its hold is taken over by a fresh authorization; each of those must never
// happen while another presentation of the bound authorization is claiming it. The interleavings
// are made with row locks this file holds in the service's own Postgres (the settler's nonce row,
// which every settle batch locks; the id's binding): every part real, the facilitator's own routes.
const AMOUNT = 10_000n;
const stack = useMoneyStack(
  {
    x402: { amountUnits: AMOUNT, payTo: newAccount().address.toLowerCase() as Address },
    env: { AGENT_X402_RECEIPT_TIMEOUT_MS: "30000" },
  },
  { timeoutMs: 180_000 },
);
const db = () => stack.db.handle.db;
const demo = () => `${stack.origin.base}/x402/demo`;

async function settle(payment: PaymentPayload, base = stack.origin.base) {
  const response = await fetch(`${base}/x402/facilitator/settle`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ x402Version: 2, paymentPayload: payment, paymentRequirements: payment.accepted }),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** A payment of `payer`'s signed by @x402/evm's own client, carrying `id`. */
const identified = (payer: PrivateKeyAccount, id: string) => identifiedEnvelope(demo(), payer, id);

/** Holds the settler's nonce row: every settle batch waits there, its claims made and not committed. */
function holdSettleBatches(): Promise<HeldLock> {
  return holdLock(
    db(),
    sql`select 1 from sender_nonces where address = ${stack.settler!.toLowerCase()} for update`,
  );
}

beforeAll(async () => {
  // A first settlement makes the settler's nonce row, as its first batch does.
  const warm = await settle(await envelope(demo(), await fundedPayer(stack.devnet.url)));
  expect(warm.body).toMatchObject({ success: true });
}, 60_000);

async function until(what: string, condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`never: ${what}`);
    await sleep(20);
  }
}

const bindingOf = async (payer: PrivateKeyAccount, id: string) =>
  (
    await queryRows<{ nonce: string }>(
      db(),
      sql`select nonce from x402_payment_ids where payer = ${payer.address.toLowerCase()} and payment_id = ${id}`,
    )
  )[0];

/** A settle batch's lock of the settler's nonce row (outbox/submit.ts lockStatement). */
const BATCH_LOCK = "insert into sender_nonces";
/** A presentation's lock of its id's binding, to let it go or take it over (payment-ids.ts lockBinding). */
const BINDING_LOCK = "from x402_payment_ids.* for update";

/**
 * Sessions of this file's database running `statement` that wait, directly or not, on the lock
 * `held` holds: a lock wait of anything else (an origin's worker, another file's database) does
 * not count.
 */
const blockedAt = (held: HeldLock, statement: string) => async () =>
  (await blockedBy(db(), { holder: held.pid, statement })) > 0;

const nonceOf = (payment: PaymentPayload) => (payment.payload.authorization as { nonce: string }).nonce;

const paid = async (payer: PrivateKeyAccount) => ({
  onChain: await authorizationUsedCount(stack.devnet.url, payer.address),
  rows: await settlementRowCount(db(), payer.address),
});

it("a presentation refused before signing lets its id go only if no other presentation of the same authorization claimed it meanwhile: a fresh authorization under the id is answered from that one, not paid again", async () => {
  // Mutation: releasePaymentId reading the settlements in the statement that waited for the
  // binding's lock (as it did) deletes the binding of a payment just settled, and the fresh
  // authorization below binds the id anew and pays a second time.
  const payer = await fundedPayer(stack.devnet.url, AMOUNT - 1n);
  const id = generatePaymentId();
  const payment = await identified(payer, id);
  // The binding is held against being deleted or locked for update (a key-share lock, which lets
  // claims through), so that the first presentation, once refused (the payer cannot cover it
  // yet), waits there to let the id go.
  const batches = await holdSettleBatches();
  const first = settle(payment);
  await until("the first presentation binds the id", async () => (await bindingOf(payer, id)) !== undefined);
  const binding = await holdLock(
    db(),
    sql`select 1 from x402_payment_ids where payer = ${payer.address.toLowerCase()} and payment_id = ${id} for key share`,
  );
  await batches.release();
  await until("the refused presentation's release waits for the binding", blockedAt(binding, BINDING_LOCK));
  // Now funded: the same payment presented again settles, while the release waits.
  await fund(stack.devnet.url, payer.address, 2n * AMOUNT * WEI_PER_UNIT);
  const settled = await settle(payment);
  expect(settled).toMatchObject({ status: 200, body: { success: true } });
  await binding.release();

  expect((await first).body).toMatchObject({ success: false, errorReason: X402_REASONS.insufficientBalance });
  // The payer's retry of the same request with a fresh authorization, as the extension intends.
  expect(await settle(await identified(payer, id))).toEqual(settled);
  expect(await paid(payer)).toEqual({ onChain: 1, rows: 1 });
  expect(await bindingOf(payer, id)).toEqual({ nonce: nonceOf(payment) });
}, 90_000);

it("a presentation whose id was let go before its batch claimed the payment binds the id again and settles under it: a fresh authorization under the id is answered from it, not paid again", async () => {
  // Mutation: the claim taking a payment under an id that no longer names it settles it with no
  // binding left, and the fresh authorization binds the id anew and pays a second time; a settle
  // that, refused the claim, does not bind again waits out its deadline and answers pending.
  const payer = await fundedPayer(stack.devnet.url, 3n * AMOUNT);
  const id = generatePaymentId();
  const payment = await identified(payer, id);
  const batches = await holdSettleBatches();
  // Another payer's batch waits at the settler's nonce row, so this payment's batch opens after it.
  const ahead = settle(await envelope(demo(), await fundedPayer(stack.devnet.url)));
  await until("a batch waits at the settler's nonce row", blockedAt(batches, BATCH_LOCK));
  const presented = settle(payment);
  await until("the presentation binds the id", async () => (await bindingOf(payer, id)) !== undefined);
  // A fault made by hand, standing for another presentation of this authorization refused before
  // signing (its checks read before the payer was funded), which let the id go.
  await db().execute(
    sql`delete from x402_payment_ids where payer = ${payer.address.toLowerCase()} and payment_id = ${id}`,
  );
  await batches.release();

  expect((await ahead).body).toMatchObject({ success: true });
  const settled = await presented;
  expect(settled).toMatchObject({ status: 200, body: { success: true } });
  expect(await settle(await identified(payer, id))).toEqual(settled);
  expect(await paid(payer)).toEqual({ onChain: 1, rows: 1 });
  expect(await bindingOf(payer, id)).toEqual({ nonce: nonceOf(payment) });
}, 90_000);

it("a binding past its hold is not taken over by a fresh authorization while a presentation of the bound one is claiming it: the fresh one is answered from that settlement, not paid again", async () => {
  // Mutation: takeOver reading the settlements in the statement that waited for the binding's lock
  // moves the id to the fresh authorization while the first is being signed, and both are paid.
  const payer = await fundedPayer(stack.devnet.url, 3n * AMOUNT);
  const id = generatePaymentId();
  const payment = await identified(payer, id);
  // A fault made by hand, standing for time: the id bound to this authorization by a presentation
  // whose origin died before claiming it, 60 s ago, so its hold has lapsed.
  await db().execute(
    sql`insert into x402_payment_ids (payer, payment_id, fingerprint, nonce, held_until)
        values (${payer.address.toLowerCase()}, ${id},
          ${paymentFingerprint({ resourceUrl: payment.resource!.url, accepted: payment.accepted })},
          ${nonceOf(payment)}, now() - interval '1 second')`,
  );
  const batches = await holdSettleBatches();
  // The same authorization presented again is the id's: its batch claims it, then waits.
  const bound = settle(payment);
  await until("the bound authorization's batch waits, claimed", blockedAt(batches, BATCH_LOCK));
  const fresh = settle(await identified(payer, id));
  const nonce = nonceOf(payment);
  await until(
    "the fresh authorization takes the id, or waits for the claim",
    // The fresh one waits behind the bound batch's claim, which waits on the held nonce row.
    async () => (await blockedAt(batches, BINDING_LOCK)()) || (await bindingOf(payer, id))?.nonce !== nonce,
  );
  await batches.release();

  const settled = await bound;
  expect(settled).toMatchObject({ status: 200, body: { success: true } });
  expect(await fresh).toEqual(settled);
  expect(await paid(payer)).toEqual({ onChain: 1, rows: 1 });
  expect(await bindingOf(payer, id)).toEqual({ nonce });
}, 90_000);

it("a settlement under an id that reverted because another relayer used its authorization first keeps the id: a fresh authorization under it is not paid again", async () => {
  // Mutation: treating every reverted settlement as one that moved nothing gives the id to the
  // fresh authorization, and the payee is paid twice for the one request.
  const proxy = await startRpcRefusalProxy(stack.devnet.url);
  try {
    const origin = await stack.startOrigin({}, undefined, proxy.url);
    const payer = await fundedPayer(stack.devnet.url, 3n * AMOUNT);
    const id = generatePaymentId();
    const payment = await identified(payer, id);
    // Another relayer sends the same signed authorization just before the settler's broadcast.
    const frontRun = await frontRunNextSettlement(proxy, stack.devnet.url, payment);
    const first = await settle(payment, origin.base);
    await frontRun.done;
    expect(first.body).toMatchObject({ success: false, errorReason: X402_REASONS.transactionFailed });

    const retry = await settle(await identified(payer, id), origin.base);
    expect(retry.body).toMatchObject({ success: false, errorReason: X402_REASONS.transactionFailed });
    expect(retry.body.transaction).toBe(first.body.transaction);
    // One payment for the one request: the relayer's.
    expect(await authorizationUsedCount(stack.devnet.url, payer.address)).toBe(1);
    expect(await bindingOf(payer, id)).toEqual({ nonce: nonceOf(payment) });
  } finally {
    await proxy.close();
  }
}, 90_000);
