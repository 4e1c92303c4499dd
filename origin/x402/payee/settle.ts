/**
 * Settlement of verified x402 payments, safe under concurrency and crashes: x402's kind of the
 * outbox (outbox/kind.ts), which runs it (outbox/submit.ts). Payments that arrive together settle
 * as one batch (one at a time per origin), in one database transaction:
 *   1. each (from, nonce) is claimed (a row of x402_settlements, unique on the pair), so N
 *      concurrent settles of one payment make one transaction; the others are told of it. A
 *      concurrent claim of the same pair by another origin waits for this transaction and then
 *      finds it taken. With the claim, the settler's nonce row is locked, so every batch that
 *      signed before this one has committed, whichever origin ran it. Meanwhile one JSON-RPC batch
 *      reads the settler's mined nonce, the block number and each payment's facts
 *      (verification's last checks: authorization unused, balance enough);
 *   2. each payment must still be inside its validity window, and its payer's balance must cover
 *      it plus what its other settlements not yet in that balance hold (reservations.ts) and its
 *      payments earlier in this batch; a claim refused is released. The claims left are signed
 *      with the next nonces, all at once; the signed transactions are stored with their claims in
 *      one statement, and the transaction commits before anything is broadcast;
 *   3. the batch goes to the node's broadcast lane (outbox/lane.ts, shared with money), which
 *      broadcasts it in one JSON-RPC batch and reads the receipts in another (a node that mines on
 *      arrival, as the devnet does, has them at once); the next batch starts once the chain has
 *      taken this one's, and a settle whose receipt is not in yet waits for it until its deadline.
 * A crash before the commit leaves nothing: no claim, nothing signed that escaped. A crash after
 * it leaves the transaction stored; the transaction tracker sends the same bytes and moves the
 * settlement with its receipt (outbox/store.ts recordMined). Round trips between processes are what a
 * settlement costs most here, so a batch pays them once, not once per payment.
 *
 * The settler pays the gas of what it signs, so it signs only what the chain will not revert for
 * anything the payer chose: every revert of the precompile's transferWithAuthorization is ruled out
 * before signing, each by a named check (docs/x402.md#what-a-settlement-must-pass lists them, and
 * the tests that present each cause and see nothing signed).
 */

import { sql } from "drizzle-orm";
import { WEI_PER_UNIT } from "../../../shared/constants.ts";
import type { Hex } from "../../../shared/hex.ts";
import { sleep } from "../../../shared/sleep.ts";
import { ethBlockNumber, ethGetTransactionCount } from "../../chain/eth-calls.ts";
import { sendRpcBatch } from "../../chain/json-rpc-call.ts";
import type { JsonRpcUpstream } from "../../chain/json-rpc-upstream.ts";
import { type Db, pgArrayLiteral, queryRows } from "../../db/client.ts";
import { preparedStatement } from "../../db/prepared.ts";
import { defineKindStore, type Outbox, type OutboxKind } from "../../outbox/index.ts";
import { X402_REASONS, type X402Reason } from "../reasons.ts";
import type { CatalogueEntry } from "./catalogue-entry.ts";
import { heldPresentation, holdMs, sha256 } from "./earlier-presentation.ts";
import { createPaidAnswerTaker } from "./paid-answers.ts";
import { type PayerFacts, payerFactsCalls, payerFactsOf } from "./payer-facts.ts";
import type { Authorization } from "./payment.ts";
import { boundToNonce, PaymentIdUnbound } from "./payment-ids.ts";
import { reservedUnits, sweepExpiredReservations } from "./reservations.ts";
import { REVERT_GUARD } from "./revert-guard.ts";
import { respond, type SettlementEnd, type SettleOutcome } from "./settle-answer.ts";
import type { ChainAuthorizationUsed } from "./used-elsewhere.ts";
import { factsRefusal, unixSeconds, windowRefusal } from "./verify.ts";

/** Gas of one settlement: 21000 intrinsic, calldata, and the precompile's 40000, with room. */
export const SETTLEMENT_GAS = 100_000n;
/** A claim without a stored transaction this long was abandoned by a settle that died. */
const CLAIM_LEASE_SECONDS = 30;
const MAX_BATCH = 64;

export type SettlementPayment = {
  authorization: Authorization;
  signature: Hex;
  requirement: unknown;
  payload: unknown;
  /**
   * The resource a /settle request names, listed by discovery once the payment settles
   * (catalogue-follower.ts); absent for the demo's own payments, which discovery lists anyway.
   */
  resource?: CatalogueEntry;
  /**
   * The payment id bound to this request (payment-ids.ts), kept with the claim: held by another
   * presentation of the same payment that claimed it under the same id, it is that request
   * presented again, answered as paid once settled.
   */
  paymentId?: string;
  /**
   * When the settle must have answered (ms since the epoch): one that first waited for its
   * revert-guard slot has that much less of the receipt wait left, so the two together stay within
   * one receipt wait. Absent: the whole receipt wait.
   */
  answerBy?: number;
};

export type SettlerDeps = {
  /** A repeated presentation reads what the earlier one came to (earlier-presentation.ts). */
  db: Db;
  settler: { address: string; keyRef: string };
  /** The time the validity window is checked against, just before signing. */
  now: () => Date;
  /** AGENT_X402_VALIDITY_MARGIN_SECONDS. */
  validityMarginSeconds: number;
  /** The node's outbox (outbox/outbox.ts), shared with money: it runs the kind, and waits for receipts. */
  outbox: Pick<Outbox, "submit" | "receipt">;
  /** How long a settle waits for its receipt before answering settlement_pending. */
  receiptTimeoutMs: number;
  /** What a presentation held by another waits beyond the receipt wait (earlier-presentation.ts holdMs). */
  holdBeyondReceiptMs?: number;
  /**
   * The origin stops (the outbox's `stopping`): a presentation waiting on another's settlement is
   * answered as it stands, settlement_pending while it is in flight (earlier-presentation.ts).
   */
  stopping?: AbortSignal;
  /**
   * Asked by a presentation answered from an earlier settlement that moved nothing, whether
   * another transaction used its authorization (earlier-presentation.ts); absent, not asked.
   */
  chainAuthorizationUsed?: ChainAuthorizationUsed;
};

export type Settler = {
  settle(payment: SettlementPayment): Promise<SettleOutcome>;
};

export function createSettler(deps: SettlerDeps): Settler {
  const kind = settleKind(deps);
  const takePaidAnswer = createPaidAnswerTaker(deps.db);
  return {
    async settle(payment) {
      const payer = payment.authorization.from;
      const deadline = Date.now() + holdMs(deps);
      let outcome = await deps.outbox.submit(kind, payment);
      // Another presentation (earlier in the batch, or in another origin) holds this payment: its
      // outcome answers this one, unless it let the claim go with nothing signed. Then this one is
      // presented again and answered by its own checks, at once: it may be sound where the other
      // was refused (another payload for the same nonce), and waiting would answer it as pending.
      while (outcome.kind === "unclaimed") {
        const earlier = await heldPresentation(deps, payment, deadline, { paymentId: payment.paymentId });
        if (earlier !== "released") return earlier;
        // Nothing holds it. A claim refuses it while its id does not name it: the id is bound again first.
        if (
          payment.paymentId !== undefined &&
          !(await boundToNonce(deps.db, bindingOf(payment, payment.paymentId)))
        )
          throw new PaymentIdUnbound();
        outcome = await deps.outbox.submit(kind, payment);
      }
      if (outcome.kind === "refused")
        return { kind: "invalid", response: respond(payer, "", outcome.refusal) };
      if (outcome.kind === "unavailable")
        return { kind: "failed", response: respond(payer, "", outcome.refusal) };
      const { txHash } = outcome.sent;
      // Whatever a node answered, the transaction may be mined (outbox/broadcast-answers.ts): an
      // answer without its receipt names it as pending. From here on the settlement is stored, with
      // its one paid answer owed (storeStatement): whatever this presentation is answered but paid
      // (pending, or a database gone away meanwhile: "present the same payment again"), the retry
      // of its payload redeems that answer (earlier-presentation.ts).
      const receipt = await deps.outbox.receipt(outcome.sent, {
        timeoutMs: receiptWaitMs(deps.receiptTimeoutMs, payment.answerBy),
      });
      if (receipt === undefined) {
        return {
          kind: "failed",
          response: respond(payer, txHash, X402_REASONS.settlementPending),
          stillInFlight: settlementEnd(deps.db, payment.authorization).catch(
            (): SettlementEnd => "not_reverted",
          ),
        };
      }
      if (receipt.status !== "confirmed") {
        return { kind: "failed", response: respond(payer, txHash, X402_REASONS.transactionFailed) };
      }
      // Answered paid only with the paid answer taken: a presentation of the same payload that
      // found it settled first (while this one waited for its receipt) was answered paid instead.
      if (!(await takePaidAnswer(payment.authorization, sha256(payment.payload)))) {
        return { kind: "duplicate", response: respond(payer, txHash, X402_REASONS.nonceUsed) };
      }
      return { kind: "settled", response: respond(payer, txHash) };
    },
  };
}

/**
 * The receipt wait left before `answerBy`, never under MIN_RECEIPT_WAIT_MS: a settlement just
 * broadcast is given a moment to be mined before it is answered pending.
 */
function receiptWaitMs(receiptTimeoutMs: number, answerBy: number | undefined): number {
  if (answerBy === undefined) return receiptTimeoutMs;
  return Math.min(receiptTimeoutMs, Math.max(MIN_RECEIPT_WAIT_MS, answerBy - Date.now()));
}
const MIN_RECEIPT_WAIT_MS = 1_000;

/** How often a settlement answered `settlement_pending` is looked at for its end. */
const IN_FLIGHT_POLL_MS = 1_000;

/**
 * What a settlement answered `settlement_pending` came to, as the tracker records it: followed on
 * past the answer for its revert-guard slot, and one still in flight after the guard's window is
 * taken as not reverted.
 */
async function settlementEnd(db: Db, authorization: Authorization): Promise<SettlementEnd> {
  const deadline = Date.now() + REVERT_GUARD.windowSeconds * 1000;
  for (;;) {
    const [row] = await queryRows<{ status: string }>(
      db,
      sql`select status from x402_settlements
          where payer = ${authorization.from} and nonce = ${authorization.nonce}`,
    );
    if (row?.status === "reverted") return "reverted";
    const inFlight = row?.status === "claimed" || row?.status === "submitted";
    if (!inFlight || Date.now() >= deadline) return "not_reverted";
    await sleep(IN_FLIGHT_POLL_MS);
  }
}

/**
 * The settle batch's rows in the outbox's store statement (outbox/kind.ts defineKindStore): the
 * claims pointed at their stored transactions, each owing its one paid answer (x402_paid_answers)
 * from the commit that makes it, so that no answer after the commit needs the database to keep
 * that promise; and the claims nothing was signed for removed (so the payment can be presented
 * again).
 */
export const storeStatement = defineKindStore<"unsigned">({
  name: "x402_settle",
  signedColumns: sql`id uuid`,
  ctes: [
    {
      name: "claims",
      sql: sql`update x402_settlements x set tx_id = st.tx_id, tx_hash = st.tx_hash, settler_nonce = s.nonce,
          updated_at = now()
        from signed s join stored st on st.tx_hash = s.tx_hash
        where x.id = s.id`,
    },
    {
      // The only place this version owes an answer: nothing else inserts here (earlier-presentation.ts).
      name: "paid_answers",
      sql: sql`insert into x402_paid_answers (settlement_id)
        select s.id from signed s join stored st on st.tx_hash = s.tx_hash
        on conflict (settlement_id) do nothing`,
    },
    {
      // A signed settlement not yet recorded mined is looked up on the chain (reservations.ts).
      name: "reservations_signed",
      sql: sql`update x402_reservations r set tx_hash = s.tx_hash
        from signed s where r.settlement_id = s.id`,
    },
    {
      // Its reservation goes with it (the foreign key cascades).
      name: "released",
      sql: sql`delete from x402_settlements
        where id = any(${sql.placeholder("unsigned")}::uuid[]) and tx_id is null`,
    },
  ],
});

/** What a batch read from the chain: the latest block number when the balances were read (or a block before), and each payment's facts. */
type SettleChain = { blockNumber: bigint; facts: Map<SettlementPayment, PayerFacts | undefined> };

/** What the checks read: the chain's facts, and what each payer's other settlements hold (reservations.ts), counted on as the batch signs. */
type SettleFacts = { chain: SettleChain; reserved: Map<string, bigint> };

/** x402's kind: settlements, signed by the settler's key, which pays their gas. */
function settleKind(deps: SettlerDeps): OutboxKind<SettlementPayment, SettleChain, SettleFacts, X402Reason> {
  const marginSeconds = BigInt(deps.validityMarginSeconds);
  return {
    name: "x402_settle",
    purpose: () => "settlement",
    // One batch at a time, up to its broadcast (its receipts are read and recorded while the next
    // one starts): the next gathers every payment that arrives meanwhile. Fewer, larger batches
    // cost the processes less per payment than two at once (bench:x402 measured CPU per payment
    // in origin, Postgres and enclave 10 to 15 % lower), and on a busy machine that is what the
    // latency follows. One at a time also sends the settler's nonces in order.
    // It never waits for the lane's room: one batch at a time, each waiting for its broadcasts,
    // never piles up more than a batch.
    batching: { maxBatch: MAX_BATCH, maxInFlight: 1, untilBroadcast: true, waitsForRoom: false },
    gasLimit: SETTLEMENT_GAS,
    // The settler's key counts no budget per signature: the whole batch is signed at once.
    window: Number.POSITIVE_INFINITY,
    now: deps.now,
    sender: () => deps.settler.address,
    readsSenderViews: false,
    claim: {
      key: (payment) => claimKey(payment.authorization.from, payment.authorization.nonce),
      statement: claimStatement,
      values: (payments) => ({ claims: JSON.stringify(payments.map(claimRow)) }),
    },
    chain: (rpc, batch) => readBatchChain(rpc, deps.settler.address, batch.items),
    async facts({ run, rpc }, batch) {
      const claimed = await batch.claimed;
      // Under the nonce row's lock, so no other batch signs for these payers meanwhile.
      const reserved = await reservedUnits(run, rpc, {
        payers: [...new Set(claimed.map(({ item }) => item.authorization.from))],
        excludeIds: claimed.map((claim) => claim.id),
        balanceBlock: batch.chain.blockNumber,
        openAfterSeconds: unixSeconds(batch.now) - marginSeconds,
      });
      return { chain: batch.chain, reserved };
    },
    check(payment, facts, at) {
      const { authorization } = payment;
      const held = facts.reserved.get(authorization.from) ?? 0n;
      // The window again, at the time of signing: a payment may have waited for this batch.
      return (
        windowRefusal(authorization, unixSeconds(at.now), marginSeconds) ??
        factsRefusal(facts.chain.facts.get(payment), authorization, held * WEI_PER_UNIT)
      );
    },
    count({ authorization }, facts) {
      facts.reserved.set(
        authorization.from,
        (facts.reserved.get(authorization.from) ?? 0n) + authorization.value,
      );
    },
    signing: ({ authorization, signature }) => ({
      op: "signSettlement",
      keyRef: deps.settler.keyRef,
      authorization,
      signature,
    }),
    // Nothing claimed, nothing signed: the same payment presented again can still settle.
    unsigned: () => ({ final: false, refusal: X402_REASONS.unexpectedSettleError }),
    // No fees or no view of the settler's nonce: the chain did not answer. Fees above the ceiling
    // are the chain's answer, not its absence.
    chainDown: (quote) =>
      !quote.ok && quote.error.code === "above_fee_ceiling"
        ? X402_REASONS.unexpectedSettleError
        : X402_REASONS.chainUnavailable,
    store: {
      statement: storeStatement,
      row: ({ id }) => ({ id }),
      values: ({ refused, unavailable }) => ({
        unsigned: pgArrayLiteral([...refused, ...unavailable].map((claim) => claim.id)),
      }),
    },
  };
}

/**
 * One JSON-RPC batch, the settler's nonce first, then the block number, then the facts: a node
 * answers a batch's calls in order (geth one by one, the devnet starting each in turn), so the
 * balances are of that block or a later one. Undefined when the chain did not say the nonce or the
 * block (a payment's facts it did not say refuse that payment alone).
 */
async function readBatchChain(
  rpc: JsonRpcUpstream,
  settler: string,
  payments: readonly SettlementPayment[],
): Promise<{ minedNonces: Map<string, bigint>; chain: SettleChain } | undefined> {
  const [nonce, block, facts] = await sendRpcBatch(rpc, [
    ethGetTransactionCount(settler),
    ethBlockNumber(),
    payments.map(({ authorization }) =>
      payerFactsCalls({ payer: authorization.from as Hex, nonce: authorization.nonce }),
    ),
  ]);
  if (!nonce.ok || !block.ok) return undefined;
  return {
    minedNonces: new Map([[settler, nonce.value]]),
    chain: {
      blockNumber: block.value,
      facts: new Map(payments.map((payment, index) => [payment, payerFactsOf(facts[index]!)])),
    },
  };
}

/**
 * Claims the batch's payments in one statement: the first presentation of each (from, nonce) in
 * the batch (the outbox hands only those), unless another presentation holds it already (a
 * committed claim, or one of another origin's open transaction, which this waits for). A claim
 * abandoned before anything was signed is taken over. Rows go in (payer, nonce) order, so two
 * batches never wait on each other in a cycle.
 * A payment under a payment id is claimed only while the id is bound to its nonce
 * (payment-ids.ts), and the binding stays locked until the batch commits: the id is let go or
 * moved to another authorization only under that lock, and only when no settlement of its nonce
 * answers for it, so it cannot go while this claim makes one.
 */
export const claimStatement = preparedStatement<"claims">(
  "x402_claim_batch",
  sql`with c as materialized (
      select * from json_to_recordset(${sql.placeholder("claims")}::json) as c(payer text, nonce text, pay_to text,
        amount_units numeric, requirement_hash text, payload_hash text, valid_after bigint,
        valid_before bigint, signature text, resource_url text, resource_description text,
        resource_mime_type text, payment_id text)),
    bound as materialized (
      select p.payer, p.payment_id from x402_payment_ids p
      join c on p.payer = c.payer and p.payment_id = c.payment_id and p.nonce = c.nonce
      order by p.payer, p.payment_id
      for share of p),
    claimed as (
      insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
        valid_after, valid_before, signature, resource_url, resource_description, resource_mime_type,
        payment_id, claimed_until)
      select payer, nonce, pay_to, amount_units, requirement_hash, payload_hash, valid_after, valid_before,
        signature, resource_url, resource_description, resource_mime_type, payment_id,
        now() + make_interval(secs => ${CLAIM_LEASE_SECONDS})
      from c
      where c.payment_id is null or (c.payer, c.payment_id) in (select payer, payment_id from bound)
      order by payer, nonce
      on conflict (payer, nonce) do update
        set claimed_until = excluded.claimed_until, updated_at = now(), error_reason = null,
          pay_to = excluded.pay_to, amount_units = excluded.amount_units,
          requirement_hash = excluded.requirement_hash, payload_hash = excluded.payload_hash,
          valid_after = excluded.valid_after, valid_before = excluded.valid_before,
          signature = excluded.signature,
          resource_url = excluded.resource_url, resource_description = excluded.resource_description,
          resource_mime_type = excluded.resource_mime_type, payment_id = excluded.payment_id
        where x402_settlements.status = 'claimed' and x402_settlements.tx_id is null
          and x402_settlements.claimed_until < now()
      returning id, payer, nonce, amount_units, valid_before),
    -- A claim taken over may have been another authorization of the same nonce (its payer signed
    -- two): the row and its reservation take the terms of the one now settled.
    reserved as (
      insert into x402_reservations (settlement_id, payer, amount_units, valid_before)
      select id, payer, amount_units, valid_before from claimed
      on conflict (settlement_id) do update
        set amount_units = excluded.amount_units, valid_before = excluded.valid_before),
    ${sweepExpiredReservations}
    select lower(payer) || ':' || lower(nonce) as key, id::text as id from claimed`,
).returns({ key: "text", id: "text" });

function claimRow({
  authorization: a,
  requirement,
  payload,
  signature,
  resource,
  paymentId,
}: SettlementPayment) {
  return {
    payer: a.from,
    nonce: a.nonce,
    pay_to: a.to,
    amount_units: a.value.toString(),
    requirement_hash: sha256(requirement),
    payload_hash: sha256(payload),
    valid_after: a.validAfter.toString(),
    valid_before: a.validBefore.toString(),
    signature,
    resource_url: resource?.url ?? null,
    resource_description: resource?.description ?? null,
    resource_mime_type: resource?.mimeType ?? null,
    payment_id: paymentId ?? null,
  };
}

function bindingOf({ authorization }: SettlementPayment, paymentId: string) {
  return { payer: authorization.from, paymentId, nonce: authorization.nonce };
}

function claimKey(payer: string, nonce: string): string {
  return `${payer.toLowerCase()}:${nonce.toLowerCase()}`;
}
