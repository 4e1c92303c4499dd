/**
 * Settlement of verified x402 payments, safe under concurrency and crashes.
 * Payments that arrive together settle as one batch (one at a time per origin), in one database
 * transaction:
 *   1. each (from, nonce) is claimed (a row of x402_settlements, unique on the pair), so N
 *      concurrent settles of one payment make one transaction; the others are told of it. A
 *      concurrent claim of the same pair by another origin waits for this transaction and then
 *      finds it taken. Meanwhile one JSON-RPC batch reads the settler's mined nonce, the block
 *      number and each payment's facts (verification's last checks: authorization unused, balance
 *      enough); a claim the facts or the validity window refuse is released;
 *   2. the settler's nonce row is locked (outbox/store.ts), so every batch that signed before
 *      this one has committed, whichever origin ran it; each payer's balance must then cover its
 *      payment plus what its other settlements not yet in that balance hold (reservations.ts) and
 *      its payments earlier in this batch. The claims left are signed with the next nonces, all at
 *      once; the signed transactions are stored with their claims in one statement, and the
 *      transaction commits before anything is broadcast;
 *   3. the batch is broadcast in one JSON-RPC batch, and the receipts are read in another (a node
 *      that mines on arrival, as the devnet does, has them at once) while the next batch starts;
 *      a settle whose receipt is not in yet polls for it until its deadline.
 * A crash before the commit leaves nothing: no claim, nothing signed that escaped. A crash after
 * it leaves the transaction stored; the transaction tracker sends the same bytes and moves the
 * settlement with its receipt (outbox/store.ts recordMined). Round trips between processes are what a
 * settlement costs most here, so a batch pays them once, not once per payment.
 *
 * The settler pays the gas of what it signs, so it signs only what the chain will not revert for
 * anything the payer chose. Rather than simulate each call, every revert of the precompile's
 * transferWithAuthorization (devnet/chain/precompile/native-transfer-auth.ts, in its order) is ruled out
 * before signing; what is left is the chain changing underneath (the payer spending its balance
 * elsewhere, another relayer using the authorization first, a settlement mined later than the
 * margin allows):
 *   - value sent, a static call, a delegate call: the enclave builds a plain call of value 0;
 *   - `from` the operator pool: verify.ts checkPayment (payerNotAllowed), and the enclave;
 *   - not yet valid (block time <= validAfter) and expired (block time >= validBefore): the
 *     window must hold AGENT_X402_VALIDITY_MARGIN_SECONDS on both sides of now, checked when the
 *     payment arrives and again here just before signing (verify.ts windowRefusal);
 *   - the authorization used: authorizationState on chain (step 1) and the claim (unique pair);
 *   - the signature (length, high S, v, the signer): checkPayment takes 65 bytes, low S only, and
 *     recovers `from` with v of 0, 1, 27 or 28, which the enclave's calldata carries as 27 or 28;
 *   - a zero or precompile recipient: `to` must equal the configured payTo (checkPayment);
 *   - the balance: step 2's reservation;
 *   - malformed arguments: the enclave encodes the calldata from fields checkPayment bounded.
 * Each cause a payer can choose has a test that presents it and sees nothing signed
 * (x402.int.test.ts "refuses with a reason and settles nothing", the v test there, the boundary and
 * over-balance attempts in x402-edge.int.test.ts, the unmined settlement in x402-faults.int.test.ts).
 */

import { createHash } from "node:crypto";
import { sql } from "drizzle-orm";
import { CAIP2_NETWORK, CHAIN_ID, WEI_PER_UNIT } from "../../shared/constants.ts";
import type { Hex } from "../../shared/hex.ts";
import { sleep } from "../../shared/sleep.ts";
import type { FeeOracle, Fees } from "../chain/fees.ts";
import { batchResults, isQuantity } from "../chain/json-rpc-results.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { createBatcher } from "../db/batcher.ts";
import { type Db, pgArrayLiteral, queryRows } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import {
  type BroadcastLease,
  bookkeep,
  nextNonceUpsert,
  type ReceiptOutcome,
  recordMined,
  recordSentBatch,
  type SentBatchDeps,
  sendRawBatch,
  signInNonceOrder,
  waitForReceipt,
} from "../outbox/index.ts";
import type { SignerClient, SignTransactionResult } from "../signer/types.ts";
import { canonicalJson } from "./canonical-json.ts";
import { type PayerFacts, payerFactsCalls, payerFactsFrom } from "./payer-facts.ts";
import type { Authorization } from "./payment.ts";
// Settlements follow their transactions' states (outbox/followers.ts).
import "./outbox-follower.ts";
import { X402_REASONS, type X402Reason } from "./reasons.ts";
import { reservedUnits } from "./reservations.ts";
import { factsRefusal, unixSeconds, windowRefusal } from "./verify.ts";

/** Gas of one settlement: 21000 intrinsic, calldata, and the precompile's 40000, with room. */
export const SETTLEMENT_GAS = 100_000n;
/** A claim without a stored transaction this long was abandoned by a settle that died. */
const CLAIM_LEASE_SECONDS = 30;
/** How often a repeated presentation looks at what the earlier one came to. */
const POLL_MS = 50;
const MAX_BATCH = 64;

/** x402's settle answer (`@x402/core` SettleResponse), as PAYMENT-RESPONSE and /settle carry it. */
export type SettleResponse = {
  success: boolean;
  errorReason?: X402Reason;
  payer: string;
  transaction: string;
  network: string;
};

export type SettleOutcome =
  /** This presentation settled the payment: receipt status 0x1. */
  | { kind: "settled"; response: SettleResponse }
  /** An earlier presentation holds the payment; `response` names its transaction. */
  | { kind: "duplicate"; response: SettleResponse }
  /** The chain's facts or the validity window refuse the payment: nothing was signed. */
  | { kind: "invalid"; response: SettleResponse }
  /** Not settled (yet): pending, reverted, refused or not attempted. */
  | { kind: "failed"; response: SettleResponse };

export type SettlementPayment = {
  authorization: Authorization;
  signature: Hex;
  requirement: unknown;
  payload: unknown;
};

export type SettlerDeps = {
  db: Db;
  rpc: JsonRpcUpstream;
  signer: SignerClient;
  fees: FeeOracle;
  logger: Logger;
  settler: { address: string; keyRef: string };
  /** The time the validity window is checked against, just before signing. */
  now: () => Date;
  /** AGENT_X402_VALIDITY_MARGIN_SECONDS. */
  validityMarginSeconds: number;
  leaseMs: number;
  /** How long a settle waits for its receipt before answering settlement_pending. */
  receiptTimeoutMs: number;
  onInFlight: () => void;
};

export type Settler = {
  settle(payment: SettlementPayment): Promise<SettleOutcome>;
};

type Receipt = ReceiptOutcome;

/** What the batch did with one payment. */
type BatchOutcome =
  /** Another presentation (here or in another origin) holds this payment. */
  | { kind: "duplicate" }
  /** The chain's facts or the validity window refuse it; its claim was released. */
  | { kind: "invalid"; reason: X402Reason }
  | { kind: "refused"; reason: X402Reason }
  /**
   * Signed, stored and sent; `receipt`, once read and recorded, is the one the chain had right
   * after the broadcast, or undefined when it had none yet.
   */
  | { kind: "sent"; txHash: Hex; txId: string; receipt: Promise<Receipt | undefined> };

export function createSettler(deps: SettlerDeps): Settler {
  // One batch at a time, up to its broadcast (its receipts are read and recorded while the next
  // one starts): the next gathers every payment that arrives meanwhile. Fewer, larger
  // batches cost the processes less per payment than two at once (bench:x402 measured CPU per
  // payment in origin, Postgres and enclave 10 to 15 % lower), and on a busy machine that is what
  // the latency follows. One at a time also sends the settler's nonces in order.
  const settleBatch = createBatcher<SettlementPayment, BatchOutcome>(
    async (items) => broadcastStored(deps, await claimSignStore(deps, items)),
    { maxBatch: MAX_BATCH, maxInFlight: 1 },
  );

  const respond = (payer: string, transaction: string, reason?: X402Reason): SettleResponse => ({
    success: reason === undefined,
    ...(reason ? { errorReason: reason } : {}),
    payer,
    transaction,
    network: CAIP2_NETWORK,
  });

  return {
    async settle(payment) {
      const payer = payment.authorization.from;
      const outcome = await settleBatch(payment);
      if (outcome.kind === "duplicate") {
        return { kind: "duplicate", response: await earlier(deps, payment.authorization, respond) };
      }
      if (outcome.kind === "invalid")
        return { kind: "invalid", response: respond(payer, "", outcome.reason) };
      if (outcome.kind === "refused") return { kind: "failed", response: respond(payer, "", outcome.reason) };
      let receipt = await outcome.receipt;
      if (receipt === undefined) {
        receipt = await waitForReceipt(deps.rpc, outcome.txHash, deps.receiptTimeoutMs);
        if (receipt === undefined) {
          return { kind: "failed", response: respond(payer, outcome.txHash, X402_REASONS.settlementPending) };
        }
        const mined = { txId: outcome.txId, ...receipt };
        await bookkeep(sentBatchDeps(deps), "recording the receipt", () => recordMined(deps.db, [mined]));
      }
      if (receipt.status !== "confirmed") {
        return { kind: "failed", response: respond(payer, outcome.txHash, X402_REASONS.transactionFailed) };
      }
      return { kind: "settled", response: respond(payer, outcome.txHash) };
    },
  };
}

function sentBatchDeps(deps: SettlerDeps): SentBatchDeps {
  return {
    db: deps.db,
    rpc: deps.rpc,
    logger: deps.logger,
    onInFlight: deps.onInFlight,
    context: "x402 settle",
  };
}

function sha256(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value)).digest("hex");
}

/** What an earlier presentation of this payment came to, once it names a transaction or ends. */
async function earlier(
  deps: SettlerDeps,
  authorization: Authorization,
  respond: (payer: string, transaction: string, reason?: X402Reason) => SettleResponse,
): Promise<SettleResponse> {
  const payer = authorization.from;
  const deadline = Date.now() + deps.receiptTimeoutMs + 5_000;
  for (;;) {
    const [row] = await queryRows<{ status: string; tx_hash: string | null; error_reason: string | null }>(
      deps.db,
      sql`select status, tx_hash, error_reason from x402_settlements
          where payer = ${payer} and nonce = ${authorization.nonce}`,
    );
    const final = row && row.status !== "claimed" && row.status !== "submitted";
    if (final || Date.now() > deadline) {
      const tx = row?.tx_hash ?? "";
      if (!row || row.status === "claimed" || row.status === "submitted") {
        return respond(payer, tx, X402_REASONS.settlementPending);
      }
      if (row.status === "settled") return respond(payer, tx, X402_REASONS.nonceUsed);
      if (row.status === "reverted") return respond(payer, tx, X402_REASONS.transactionFailed);
      return respond(
        payer,
        tx,
        (row.error_reason as X402Reason | null) ?? X402_REASONS.unexpectedSettleError,
      );
    }
    await sleep(POLL_MS);
  }
}

/** A batch after its database transaction: what it decided, and the settlements it stored. */
type SignedBatch = { outcomes: BatchOutcome[]; stored: Array<{ index: number; lease: BroadcastLease }> };

/**
 * One database transaction claims the payments (while the chain says its fees, the settler's
 * mined nonce, the block number and the payments' facts), locks the settler's nonce row, keeps
 * what the window, the facts and the payers' balances allow, signs it with the next nonces and
 * stores it.
 */
async function claimSignStore(deps: SettlerDeps, payments: SettlementPayment[]): Promise<SignedBatch> {
  const outcomes: BatchOutcome[] = payments.map(() => ({ kind: "duplicate" }));
  // Nothing claimed, nothing signed: the same payment presented again can still settle.
  const unavailable = { kind: "refused", reason: X402_REASONS.unexpectedSettleError } as const;
  // The chain is read while the payments are claimed: a round trip to a busy node costs about
  // what the claim does, and the nonce row's lock, taken after both, orders batches. The claims
  // are made even when the chain is out of reach, so a payment presented again is still told of
  // its earlier presentation.
  const quoted = deps.fees.quote(SETTLEMENT_GAS);
  const chainRead = readBatchChain(deps, payments);
  const stored = await deps.db.transaction(async (tx) => {
    const claims = await claimAll(tx, payments);
    if (claims.length === 0) return [];
    const [quote, chain] = await Promise.all([quoted, chainRead]);
    if (!quote.ok || chain.minedNonce === undefined || chain.blockNumber === undefined) {
      // The claims are released; the others stay duplicates: an earlier presentation holds them,
      // whatever the chain says.
      for (const claim of claims) outcomes[claim.index] = unavailable;
      await releaseClaims(tx, claims);
      return [];
    }
    const fees = quote.fees;
    const released: Claim[] = [];
    const refuse = (claim: Claim, reason: X402Reason): void => {
      outcomes[claim.index] = { kind: "invalid", reason };
      released.push(claim);
    };
    // The window again, at the time of signing: a payment may have waited for this batch.
    const nowSeconds = unixSeconds(deps.now());
    const marginSeconds = BigInt(deps.validityMarginSeconds);
    const candidates: Claim[] = [];
    for (const claim of claims) {
      const { authorization } = claim.payment;
      const refusal =
        windowRefusal(authorization, nowSeconds, marginSeconds) ??
        factsRefusal(chain.facts[claim.index], authorization);
      if (refusal) refuse(claim, refusal);
      else candidates.push(claim);
    }
    if (candidates.length === 0) return storeSigned(tx, deps, fees, [], released);
    const [next] = await queryRows<{ next_nonce: string }>(
      tx,
      nextNonceUpsert(deps.settler.address, chain.minedNonce),
    );
    // Under the nonce row's lock, so no other batch signs for these payers meanwhile.
    const reserved = await reservedUnits(tx, deps.rpc, {
      payers: [...new Set(candidates.map((claim) => claim.payment.authorization.from))],
      excludeIds: claims.map((claim) => claim.id),
      balanceBlock: chain.blockNumber,
      openAfterSeconds: nowSeconds - marginSeconds,
    });
    const signed: SignedClaim[] = [];
    const unsigned: Claim[] = [];
    await signInNonceOrder(candidates, BigInt(next!.next_nonce), {
      // The settler's key counts no budget per signature: the whole batch is signed at once.
      window: candidates.length,
      admit(claim) {
        const { authorization } = claim.payment;
        const held = reserved.get(authorization.from) ?? 0n;
        const refusal = factsRefusal(chain.facts[claim.index], authorization, held * WEI_PER_UNIT);
        if (refusal) {
          refuse(claim, refusal);
          return false;
        }
        reserved.set(authorization.from, held + authorization.value);
        return true;
      },
      sign: (claim, nonce) =>
        deps.signer.signSettlement({
          keyRef: deps.settler.keyRef,
          chainId: CHAIN_ID,
          authorization: claim.payment.authorization,
          signature: claim.payment.signature,
          nonce,
          maxFeePerGas: fees.maxFeePerGas,
          maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
          gasLimit: fees.gasLimit,
        }),
      signed: (claim, nonce, result) => signed.push({ ...claim, nonce, ...result }),
      unsigned(claim, failure) {
        deps.logger.warn({ code: failure.code, class: failure.class }, "enclave refused a settlement");
        outcomes[claim.index] = unavailable;
        unsigned.push(claim);
      },
    });
    return storeSigned(tx, deps, fees, signed, [...released, ...unsigned]);
  });
  return { outcomes, stored };
}

/**
 * One JSON-RPC batch broadcasts the stored settlements. Once the chain has taken them the next
 * batch may start (its nonces follow these), while another JSON-RPC batch reads their receipts
 * and they are recorded; this batch's payers are answered after that.
 */
async function broadcastStored(
  deps: SettlerDeps,
  { outcomes, stored }: SignedBatch,
): Promise<BatchOutcome[]> {
  if (stored.length === 0) return outcomes;
  const leases = stored.map((item) => item.lease);
  const sent = await sendRawBatch(deps.rpc, leases);
  const recorded = recordSentBatch(sentBatchDeps(deps), leases, sent);
  for (const [n, item] of stored.entries()) {
    const { txHash, txId } = item.lease;
    outcomes[item.index] =
      sent[n]!.kind === "refused"
        ? { kind: "refused", reason: X402_REASONS.unexpectedSettleError }
        : {
            kind: "sent",
            txHash: txHash as Hex,
            txId,
            receipt: recorded.then((receipts) => receipts.get(txHash)),
          };
  }
  return outcomes;
}

type Claim = { index: number; id: string; payment: SettlementPayment };

/**
 * What a batch reads from the chain: the settler's mined nonce, the latest block number when the
 * balances were read (or a block before), and each payment's facts.
 */
type BatchChain = {
  minedNonce: bigint | undefined;
  blockNumber: bigint | undefined;
  facts: Array<PayerFacts | undefined>;
};

/**
 * One JSON-RPC batch, the settler's nonce first, then the block number, then the facts: a node
 * answers a batch's calls in order (geth one by one, the devnet starting each in turn), so the
 * balances are of that block or a later one. Undefined parts when the chain did not say.
 */
async function readBatchChain(deps: SettlerDeps, payments: SettlementPayment[]): Promise<BatchChain> {
  const queries = payments.map(({ authorization }) => ({
    payer: authorization.from as Hex,
    nonce: authorization.nonce,
  }));
  const answer = await deps.rpc.send([
    { jsonrpc: "2.0", id: 0, method: "eth_getTransactionCount", params: [deps.settler.address, "latest"] },
    { jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] },
    ...payerFactsCalls(queries, 2),
  ]);
  const results = batchResults(answer);
  const nonce = results.get(0);
  const block = results.get(1);
  return {
    minedNonce: isQuantity(nonce) ? BigInt(nonce) : undefined,
    blockNumber: isQuantity(block) ? BigInt(block) : undefined,
    facts: payerFactsFrom(results, queries.length, 2),
  };
}

/**
 * Claims the batch's payments in one statement: the first presentation of each (from, nonce) in
 * the batch, unless another presentation holds it already (a committed claim, or one of another
 * origin's open transaction, which this waits for). A claim abandoned before anything was signed
 * is taken over. Rows go in (payer, nonce) order, so two batches never wait on each other in a cycle.
 */
async function claimAll(tx: Db, payments: SettlementPayment[]): Promise<Claim[]> {
  const first = new Map<string, number>();
  payments.forEach((payment, index) => {
    const key = claimKey(payment.authorization.from, payment.authorization.nonce);
    if (!first.has(key)) first.set(key, index);
  });
  const rows = [...first.values()].map((index) => {
    const { authorization: a, requirement, payload, signature } = payments[index]!;
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
    };
  });
  const claimed = await queryRows<{ id: string; payer: string; nonce: string }>(
    tx,
    sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
          valid_after, valid_before, signature, claimed_until)
        select payer, nonce, pay_to, amount_units, requirement_hash, payload_hash, valid_after, valid_before,
          signature, now() + make_interval(secs => ${CLAIM_LEASE_SECONDS})
        from json_to_recordset(${JSON.stringify(rows)}::json) as c(payer text, nonce text, pay_to text,
          amount_units numeric, requirement_hash text, payload_hash text, valid_after bigint,
          valid_before bigint, signature text)
        order by payer, nonce
        on conflict (payer, nonce) do update
          set claimed_until = excluded.claimed_until, updated_at = now(), error_reason = null
          where x402_settlements.status = 'claimed' and x402_settlements.tx_id is null
            and x402_settlements.claimed_until < now()
        returning id, payer, nonce`,
  );
  return claimed
    .map((row) => {
      const index = first.get(claimKey(row.payer, row.nonce))!;
      return { index, id: row.id, payment: payments[index]! };
    })
    .sort((a, b) => a.index - b.index);
}

function claimKey(payer: string, nonce: string): string {
  return `${payer.toLowerCase()}:${nonce.toLowerCase()}`;
}

type SignedClaim = Claim & { nonce: bigint } & SignTransactionResult;

/** Releases claims nothing was signed for, so the payment can be presented again. */
async function releaseClaims(tx: Db, claims: Claim[]): Promise<void> {
  await tx.execute(sql`delete from x402_settlements
      where id = any(${pgArrayLiteral(claims.map((claim) => claim.id))}::uuid[]) and tx_id is null`);
}

/**
 * In one statement: the signed settlements stored (with their broadcast leases), the settler's
 * next nonce moved past them, their claims pointed at them, and the claims nothing was signed for
 * removed (so the payment can be presented again).
 */
async function storeSigned(
  tx: Db,
  deps: SettlerDeps,
  fees: Fees,
  signed: SignedClaim[],
  unsigned: Claim[],
): Promise<Array<{ index: number; lease: BroadcastLease }>> {
  const rows = signed.map((item) => ({
    id: item.id,
    nonce: item.nonce.toString(),
    tx_hash: item.txHash,
    raw_tx: item.rawTransaction,
  }));
  const stored = await queryRows<{ tx_id: string; tx_hash: string }>(
    tx,
    sql`with signed as (
          select * from json_to_recordset(${JSON.stringify(rows)}::json) as s(id uuid, nonce bigint, tx_hash text, raw_tx text)),
        stored as (
          insert into outgoing_transactions (purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, broadcast_lease_until)
          select 'settlement', ${deps.settler.address}, nonce, tx_hash, raw_tx, ${(fees.gasLimit * fees.maxFeePerGas).toString()}::numeric,
            now() + make_interval(secs => ${deps.leaseMs / 1000})
          from signed order by nonce
          returning tx_id, tx_hash),
        nonces as (
          update sender_nonces set next_nonce = (select max(nonce) + 1 from signed), updated_at = now()
          where address = ${deps.settler.address} and exists (select 1 from signed)),
        claims as (
          update x402_settlements x set tx_id = st.tx_id, tx_hash = st.tx_hash, settler_nonce = s.nonce, updated_at = now()
          from signed s join stored st on st.tx_hash = s.tx_hash
          where x.id = s.id),
        released as (
          delete from x402_settlements
          where id = any(${pgArrayLiteral(unsigned.map((claim) => claim.id))}::uuid[]) and tx_id is null)
        select tx_id, tx_hash from stored`,
  );
  const ids = new Map(stored.map((row) => [row.tx_hash, row.tx_id]));
  return signed.map((item) => ({
    index: item.index,
    lease: { txId: ids.get(item.txHash)!, rawTx: item.rawTransaction, txHash: item.txHash, status: "signed" },
  }));
}
