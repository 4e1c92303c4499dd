import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../../devnet/testing.ts";
import { startRewritingEnclaveProxy } from "../../../testing/fault-enclave.ts";
import { useFixture, useMoneyStack, useStackOrigin } from "../../../testing/stack.ts";
import {
  envelope,
  envelopeWithWindow,
  fundedPayer,
  pay,
  paymentHeader,
  quote,
} from "../../../testing/x402-payer.ts";
import { queryRows } from "../../db/client.ts";
import { createSignerClient } from "../../signer/create-signer-client.ts";
import { X402_REASONS } from "../reasons.ts";
import { decodePaymentHeader } from "./payment.ts";
import { createSettler } from "./settle.ts";

// Settlements of one batch are signed all at once with consecutive settler nonces (settle.ts). If
// the enclave refuses one of them, the ones after it must be signed again from its nonce: a
// refused nonce left as a gap would hold every later settlement back on chain. The refusal comes
// from a FAKE: a proxy in front of the real enclave that turns one sign_settlement answer into an
// error (the real enclave refuses only payments that verification already turns away).
const AMOUNT = 10_000n;
const PAYMENTS = 8;
const REFUSED = 3;
const payTo = newAccount().address.toLowerCase() as Address;

let settlementAnswers = 0;

const stack = useMoneyStack({ x402: { amountUnits: AMOUNT, payTo } }, { timeoutMs: 120_000 });
const proxy = useFixture(
  "rewriting enclave proxy",
  () =>
    startRewritingEnclaveProxy(stack.enclave.socketPath, (op, response) => {
      if (op !== "sign_settlement") return response;
      settlementAnswers++;
      return settlementAnswers === REFUSED
        ? { v: 1, id: response.id, ok: false, error: { code: "cap_exceeded", reason: "fake refusal" } }
        : response;
    }),
  (enclaveProxy) => enclaveProxy.close(),
  { timeoutMs: 120_000 },
);
const origin = useStackOrigin(
  "origin",
  stack,
  () => ({
    // A short receipt wait: a settlement held back behind a nonce gap shows as pending, soon.
    env: { AGENT_X402_RECEIPT_TIMEOUT_MS: "3000" },
    signer: createSignerClient({ endpoint: proxy.endpoint, liveIdentityEnabled: true }),
  }),
  { timeoutMs: 120_000 },
);

/** A settler on the stack's own origin (the real enclave, not the proxy), as the origin makes it. */
async function stackSettler(receiptTimeoutMs: number) {
  const deps = stack.origin.deps;
  const sealed = await stack.signer.getPolicy();
  if (!sealed.ok || !sealed.value.settler) throw new Error("the stack has no settler");
  return createSettler({
    db: deps.database.db,
    settler: {
      address: sealed.value.settler.settlerAddress.toLowerCase(),
      keyRef: sealed.value.settler.settlerKeyRef,
    },
    now: () => new Date(),
    validityMarginSeconds: deps.config.x402.validityMarginSeconds,
    receiptTimeoutMs,
    outbox: deps.money!.outbox,
  });
}

/** What the settler takes for one payment of `payer`: the official client's envelope, parsed. */
async function settlementOf(
  quoted: Parameters<typeof envelopeWithWindow>[0],
  payer: Parameters<typeof envelopeWithWindow>[1],
  window: Parameters<typeof envelopeWithWindow>[2],
) {
  const parsed = decodePaymentHeader(paymentHeader(await envelopeWithWindow(quoted, payer, window)));
  if (!parsed.ok) throw new Error("the test's envelope does not parse");
  const { authorization, signature, accepted, raw } = parsed.value;
  return { authorization, signature, requirement: accepted, payload: raw };
}

describe("x402 settlement batches", () => {
  it("re-signs the settlements after one the enclave refused: the rest settle on consecutive nonces", async () => {
    const demo = `${origin.base}/x402/demo`;
    const payers = await Promise.all(Array.from({ length: PAYMENTS }, () => fundedPayer(stack.devnet.url)));
    const headers = await Promise.all(
      payers.map(async (payer) => paymentHeader(await envelope(demo, payer))),
    );
    // All at once, so that they share a batch and the refusal falls in its middle.
    const answers = await Promise.all(headers.map((header) => pay(demo, header)));

    const statuses = answers.map((answer) => answer.status).sort();
    expect(statuses).toEqual([...Array(PAYMENTS - 1).fill(200), 402]);
    const refused = answers.find((answer) => answer.status === 402)!;
    expect(refused.body.error).toBe(X402_REASONS.unexpectedSettleError);

    const rows = await queryRows<{ status: string; settler_nonce: string }>(
      stack.db.handle.db,
      sql`select status, settler_nonce::text from x402_settlements where pay_to = ${payTo} order by settler_nonce`,
    );
    expect(rows.map((row) => row.status)).toEqual(Array(PAYMENTS - 1).fill("settled"));
    const nonces = rows.map((row) => BigInt(row.settler_nonce));
    expect(nonces.map((nonce) => nonce - nonces[0]!)).toEqual(
      Array.from({ length: PAYMENTS - 1 }, (_, i) => BigInt(i)),
    );
    const chainNonce = await publicClientFor(stack.devnet.url).getTransactionCount({
      address: stack.settler!,
    });
    expect(BigInt(chainNonce)).toBe(nonces.at(-1)! + 1n);

    // Its claim went with the refusal, so the same payment presented again settles.
    const again = await pay(demo, headers[answers.indexOf(refused)]!);
    expect(again.status).toBe(200);
  });

  it("settles many payments from one settler across several batches: each batch lands in a block of its own at contiguous nonces, after the batch before it, none stuck", async () => {
    // Settle batches are pipelined (settle.ts: one at a time, the next starting once the chain has
    // taken this one's broadcast, while its receipts are still read): nonce order across batches
    // rests on the broadcast lane's order. 150 payments handed over in one turn make batches of 64,
    // 64 and 22 (settle.ts MAX_BATCH). Mutation: the settle kind not waiting for its broadcast
    // (`untilBroadcast: false`, maxInFlight 2) with the lane sending each batch as it comes (no
    // one JSON-RPC batch at a time): a later batch reaches the chain before an earlier one, its
    // transactions wait in the devnet's queue for the gap and land in the earlier batch's block,
    // or past the queue's 64 per sender not at all.
    const settler = await stackSettler(30_000);
    const quoted = await quote(`${stack.origin.base}/x402/demo`);
    const payers = await Promise.all(Array.from({ length: 5 }, () => fundedPayer(stack.devnet.url)));
    const window = {
      validAfter: 0n,
      validBefore: BigInt(Math.floor(Date.now() / 1000) + quoted.accepted.maxTimeoutSeconds),
    };
    const payments = await Promise.all(
      Array.from({ length: 150 }, async (_, index) => {
        const payer = payers[index % payers.length]!;
        return settlementOf(quoted, payer, window);
      }),
    );
    const outcomes = await Promise.all(payments.map((payment) => settler.settle(payment)));
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(Array(payments.length).fill("settled"));

    const rows = await queryRows<{ nonce: string; tx_hash: string; batch: string; status: string }>(
      stack.db.handle.db,
      sql`select o.nonce::text, o.tx_hash, o.status, o.created_at::text as batch
          from x402_settlements x join outgoing_transactions o on o.tx_id = x.tx_id
          where x.payer = any(${`{${payers.map((payer) => payer.address.toLowerCase()).join(",")}}`}::text[])
          order by o.nonce`,
    );
    expect(rows).toHaveLength(payments.length);
    expect(rows.every((row) => row.status === "confirmed")).toBe(true);
    // One batch is one database transaction: its rows share their transaction's timestamp.
    const batches = new Map<string, bigint[]>();
    for (const row of rows) batches.set(row.batch, [...(batches.get(row.batch) ?? []), BigInt(row.nonce)]);
    const ordered = [...batches.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, nonces]) => nonces);
    expect(ordered.length).toBeGreaterThanOrEqual(3);
    // Each batch at contiguous nonces, each following the batch before it.
    let next = ordered[0]![0]!;
    for (const nonces of ordered) {
      expect(nonces).toEqual(nonces.map((_, n) => next + BigInt(n)));
      next += BigInt(nonces.length);
    }
    // On chain: each batch mined in a block of its own, in nonce order, each block after the one
    // before; and the settler's nonce past the last, nothing left waiting.
    const chain = publicClientFor(stack.devnet.url);
    const receipts = new Map(
      await Promise.all(
        rows.map(
          async (row) =>
            [
              BigInt(row.nonce),
              await chain.getTransactionReceipt({ hash: row.tx_hash as `0x${string}` }),
            ] as const,
        ),
      ),
    );
    let previousBlock = -1n;
    for (const nonces of ordered) {
      const landed = nonces.map((nonce) => receipts.get(nonce)!);
      expect(landed.every((receipt) => receipt.status === "success")).toBe(true);
      const blocks = new Set(landed.map((receipt) => receipt.blockNumber));
      expect(blocks.size).toBe(1);
      const [block] = blocks;
      expect(block! > previousBlock).toBe(true);
      previousBlock = block!;
      const indexes = landed.map((receipt) => receipt.transactionIndex);
      expect(indexes).toEqual([...indexes].sort((a, b) => a - b));
    }
    expect(BigInt(await chain.getTransactionCount({ address: stack.settler! }))).toBe(next);
  });

  it("counts a payer's payments of one batch against its balance as they are admitted: of 6 from a balance covering 2, 2 settle and 4 are refused insufficient_balance, none reverts", async () => {
    // A batch signs its settlements all at once (settle.ts, its window), so each is admitted
    // before any is signed. Mutation: counting a payment only once its signature is kept
    // (outbox/submit.ts, `kind.window > 1`) lets all six see the whole balance: six are signed
    // and four revert at the settler's expense.
    const settler = await stackSettler(10_000);
    const quoted = await quote(`${stack.origin.base}/x402/demo`);
    const short = await fundedPayer(stack.devnet.url, 2n * AMOUNT);
    // The official client's window: valid from 0, for the quote's maxTimeoutSeconds.
    const window = {
      validAfter: 0n,
      validBefore: BigInt(Math.floor(Date.now() / 1000) + quoted.accepted.maxTimeoutSeconds),
    };
    const payments = await Promise.all(
      Array.from({ length: 6 }, async () => {
        return settlementOf(quoted, short, window);
      }),
    );
    // Handed over in one turn of the event loop: one batch.
    const outcomes = await Promise.all(payments.map((payment) => settler.settle(payment)));
    expect(
      outcomes
        .map(
          (outcome) =>
            `${outcome.kind}${outcome.response.errorReason ? ` ${outcome.response.errorReason}` : ""}`,
        )
        .sort(),
    ).toEqual([...Array(4).fill(`invalid ${X402_REASONS.insufficientBalance}`), "settled", "settled"]);
    const rows = await queryRows<{ status: string }>(
      stack.db.handle.db,
      sql`select status from x402_settlements where payer = ${short.address.toLowerCase()}`,
    );
    expect(rows.map((row) => row.status)).toEqual(["settled", "settled"]);
    // What later batches read of this payer (reservations.ts): the two settled ones with the blocks
    // they were mined in, so a balance read at that block or later does not count them again; the
    // four refused ones went with their claims. Mutation: without outbox-follower.ts
    // reservationMinedFollower both stay in flight, each looked up on the chain by every later batch.
    await expect
      .poll(() =>
        queryRows<{ settled_block: string | null; block_number: string | null }>(
          stack.db.handle.db,
          sql`select r.settled_block::text, t.block_number::text from x402_reservations r
              join x402_settlements x on x.id = r.settlement_id
              join outgoing_transactions t on t.tx_id = x.tx_id
              where r.payer = ${short.address.toLowerCase()}
                and r.settled_block is not distinct from t.block_number`,
        ),
      )
      .toHaveLength(2);
    expect(
      await queryRows(
        stack.db.handle.db,
        sql`select 1 from x402_reservations where payer = ${short.address.toLowerCase()}`,
      ),
    ).toHaveLength(2);
  });
});

describe("a payment presented twice in one batch", () => {
  it("whose first presentation is refused: the second is answered by its own checks at once, never as pending", async () => {
    // Of [A, B, B] from a balance covering one, the batch claims A and the first B; B is refused
    // insufficient_balance and its claim let go. The second B found the claim held (outbox/submit.ts
    // claims a key once a batch): it must learn the refusal by presenting itself again. Mutation:
    // answering it from the earlier presentation alone (settle.ts) finds no row and, after the
    // receipt wait and more, answers settlement_pending with no transaction.
    const settler = await stackSettler(3_000);
    const quoted = await quote(`${stack.origin.base}/x402/demo`);
    const short = await fundedPayer(stack.devnet.url, AMOUNT);
    const window = {
      validAfter: 0n,
      validBefore: BigInt(Math.floor(Date.now() / 1000) + quoted.accepted.maxTimeoutSeconds),
    };
    const first = await settlementOf(quoted, short, window);
    const second = await settlementOf(quoted, short, window);
    // Handed over in one turn of the event loop: one batch.
    const outcomes = await Promise.all([first, second, second].map((payment) => settler.settle(payment)));
    expect(outcomes.map((outcome) => [outcome.kind, outcome.response.errorReason])).toEqual([
      ["settled", undefined],
      ["invalid", X402_REASONS.insufficientBalance],
      ["invalid", X402_REASONS.insufficientBalance],
    ]);
    const rows = await queryRows<{ nonce: string; status: string }>(
      stack.db.handle.db,
      sql`select nonce, status from x402_settlements where payer = ${short.address.toLowerCase()}`,
    );
    expect(rows).toEqual([{ nonce: first.authorization.nonce, status: "settled" }]);
  });
});

describe("a settlement mined but not yet recorded", () => {
  it("is looked up on the chain by the next batch and not counted again: a payer whose balance covers two pays twice", async () => {
    // The window between a settlement's block and the outbox recording its receipt is real but
    // brief; the test makes it last by setting the first payment's reservation back to in flight
    // (settled_block null) once it has settled, the row the receipts' follower had just updated.
    // The second batch then reads a balance that no longer holds the first payment and a
    // reservation that still does: it counts it twice unless it finds the receipt by the hash the
    // store kept. Mutations: without settle.ts storeStatement's `reservations_signed` (tx_hash never
    // set), or without reservations.ts's readReceipts, the second payment is refused
    // insufficient_balance.
    const settler = await stackSettler(10_000);
    const quoted = await quote(`${stack.origin.base}/x402/demo`);
    const payer = await fundedPayer(stack.devnet.url, 2n * AMOUNT);
    const window = {
      validAfter: 0n,
      validBefore: BigInt(Math.floor(Date.now() / 1000) + quoted.accepted.maxTimeoutSeconds),
    };
    async function payOnce() {
      const outcome = await settler.settle(await settlementOf(quoted, payer, window));
      return `${outcome.kind}${outcome.response.errorReason ? ` ${outcome.response.errorReason}` : ""}`;
    }
    const address = payer.address.toLowerCase();

    expect(await payOnce()).toBe("settled");
    await expect
      .poll(() =>
        queryRows(
          stack.db.handle.db,
          sql`select 1 from x402_reservations where payer = ${address} and settled_block is not null`,
        ),
      )
      .toHaveLength(1);
    const unrecorded = await queryRows(
      stack.db.handle.db,
      sql`update x402_reservations set settled_block = null where payer = ${address} returning 1`,
    );
    expect(unrecorded).toHaveLength(1);

    expect(await payOnce()).toBe("settled");
    expect(await publicClientFor(stack.devnet.url).getBalance({ address: payer.address })).toBe(0n);
  });
});
