/**
 * Settlement of verified x402 payments (issue 13 item 4), safe under concurrency and crashes:
 *   1. (from, nonce) is claimed in Postgres (a row of x402_settlements) before anything is signed,
 *      so N concurrent settles of one payment make one transaction; the others are told of it;
 *   2. claims that arrive together are signed as one batch under the settler's nonce row lock
 *      (chain/outgoing.ts), each stored before it is broadcast, nonces one at a time from the DB;
 *   3. the batch is broadcast in one JSON-RPC batch, and each settle waits for its receipt.
 * A crash after 2 leaves the transaction stored; the transaction tracker sends the same bytes and
 * moves the settlement with its receipt (outgoing.ts recordMined). A claim whose settle died before
 * signing is taken over by the next presentation once its lease ends; verify has by then checked
 * authorizationState on chain, so nothing is signed twice for one payment.
 */
import { createHash } from "node:crypto";
import { sql } from "drizzle-orm";
import { CAIP2_NETWORK, CHAIN_ID } from "../../shared/constants.ts";
import type { Hex } from "../../shared/hex.ts";
import type { FeeOracle } from "../chain/fees.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import {
  type BroadcastLease,
  nextNonceUpsert,
  readSenderView,
  recordBroadcastOutcomes,
  recordMined,
  recordSigned,
  sendRawBatch,
} from "../chain/outgoing.ts";
import { createBatcher } from "../db/batcher.ts";
import { type Db, queryRows } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import type { SignerClient } from "../signer/types.ts";
import type { Authorization } from "./payment.ts";
import { X402_REASONS, type X402Reason } from "./reasons.ts";

/** Gas of one settlement: 21000 intrinsic, calldata, and the precompile's 40000, with room. */
export const SETTLEMENT_GAS = 100_000n;
/** A claim without a stored transaction this long was abandoned by a settle that died. */
const CLAIM_LEASE_SECONDS = 30;
const POLL_MS = 50;

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
  leaseMs: number;
  /** How long a settle waits for its receipt before answering settlement_pending. */
  receiptTimeoutMs: number;
  onInFlight: () => void;
  /** Crash tests only (scripts/test/money-crash-origin.ts): after the chain accepted a broadcast. */
  faults?: { afterBroadcast?: () => void };
};

export type Settler = {
  settle(payment: SettlementPayment): Promise<SettleOutcome>;
  /** What became of an earlier presentation of this (from, nonce); undefined if none is known here. */
  known(authorization: Authorization): Promise<SettleResponse | undefined>;
};

type Claimed = { id: string; payment: SettlementPayment };
type Signed = { kind: "signed"; txHash: Hex; txId: string } | { kind: "refused"; reason: X402Reason };

export function createSettler(deps: SettlerDeps): Settler {
  const sign = createBatcher<Claimed, Signed>((items) => signBatch(deps, items), {
    maxBatch: 64,
    maxInFlight: 1,
  });

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
      const id = await claim(deps.db, payment);
      if (!id) return { kind: "duplicate", response: await earlier(deps, payment.authorization, respond) };
      const signed = await sign({ id, payment });
      if (signed.kind === "refused") return { kind: "failed", response: respond(payer, "", signed.reason) };
      const receipt = await waitForReceipt(deps, signed.txHash);
      if (receipt === undefined) {
        return { kind: "failed", response: respond(payer, signed.txHash, X402_REASONS.settlementPending) };
      }
      await recordMined(deps.db, [{ txId: signed.txId, ...receipt }]);
      if (receipt.status !== "confirmed") {
        return { kind: "failed", response: respond(payer, signed.txHash, X402_REASONS.transactionFailed) };
      }
      return { kind: "settled", response: respond(payer, signed.txHash) };
    },
    async known(authorization) {
      const [row] = await queryRows<{ id: string }>(
        deps.db,
        sql`select id from x402_settlements where payer = ${authorization.from} and nonce = ${authorization.nonce}`,
      );
      return row ? earlier(deps, authorization, respond) : undefined;
    },
  };
}

function sha256(value: unknown): string {
  return createHash("sha256").update(canonicalJson(value)).digest("hex");
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/**
 * Inserts the claim, or takes over one abandoned before anything was signed; undefined when
 * another presentation holds the payment.
 */
async function claim(db: Db, payment: SettlementPayment): Promise<string | undefined> {
  const { authorization: a } = payment;
  const [row] = await queryRows<{ id: string }>(
    db,
    sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
          valid_after, valid_before, signature, claimed_until)
        values (${a.from}, ${a.nonce}, ${a.to}, ${a.value.toString()}, ${sha256(payment.requirement)},
          ${sha256(payment.payload)}, ${a.validAfter}, ${a.validBefore}, ${payment.signature},
          now() + make_interval(secs => ${CLAIM_LEASE_SECONDS}))
        on conflict (payer, nonce) do update
          set claimed_until = excluded.claimed_until, updated_at = now(), error_reason = null
          where x402_settlements.status = 'claimed' and x402_settlements.tx_id is null
            and x402_settlements.claimed_until < now()
        returning id`,
  );
  return row?.id;
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
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/**
 * One batch of claims: the settler's chain view and fees read first (no lock held), then one
 * transaction holding its nonce row signs each claim with the next nonce and stores it, then one
 * JSON-RPC batch broadcasts them all.
 */
async function signBatch(deps: SettlerDeps, items: Claimed[]): Promise<Signed[]> {
  const results: Signed[] = new Array(items.length);
  const quote = await deps.fees.quote(SETTLEMENT_GAS);
  const view = quote.ok ? await readSenderView(deps.rpc, deps.settler.address) : undefined;
  if (!quote.ok || !view) {
    // Nothing signed: the claims are released so a retry of the same payment can settle it.
    await release(deps.db, items);
    return items.map(() => ({ kind: "refused", reason: X402_REASONS.unexpectedSettleError }));
  }
  const fees = quote.fees;
  const leases: { index: number; lease: BroadcastLease }[] = [];
  const unsigned: Claimed[] = [];
  await deps.db.transaction(async (tx) => {
    const [next] = await queryRows<{ next_nonce: string }>(
      tx,
      nextNonceUpsert(deps.settler.address, view.minedNonce),
    );
    let nonce = BigInt(next!.next_nonce);
    for (const [index, item] of items.entries()) {
      const signed = await deps.signer.signSettlement({
        keyRef: deps.settler.keyRef,
        chainId: CHAIN_ID,
        authorization: item.payment.authorization,
        signature: item.payment.signature,
        nonce,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        gasLimit: fees.gasLimit,
      });
      if (!signed.ok) {
        deps.logger.warn(
          { code: signed.error.code, class: signed.error.class },
          "enclave refused a settlement",
        );
        unsigned.push(item);
        results[index] = { kind: "refused", reason: X402_REASONS.unexpectedSettleError };
        continue;
      }
      const lease = await recordSigned(
        tx,
        {
          purpose: "settlement",
          sender: deps.settler.address,
          nonce,
          txHash: signed.value.txHash,
          rawTx: signed.value.rawTransaction,
          maxCostWei: fees.gasLimit * fees.maxFeePerGas,
        },
        { leaseMs: deps.leaseMs },
      );
      await tx.execute(sql`update x402_settlements set tx_id = ${lease.txId}, tx_hash = ${lease.txHash},
          settler_nonce = ${nonce}, updated_at = now() where id = ${item.id}`);
      leases.push({ index, lease });
      results[index] = { kind: "signed", txHash: signed.value.txHash, txId: lease.txId };
      nonce++;
    }
  });
  await release(deps.db, unsigned);
  if (leases.length === 0) return results;
  const outcomes = await sendRawBatch(
    deps.rpc,
    leases.map((item) => item.lease),
  );
  await recordBroadcastOutcomes(
    deps.db,
    leases.map((item) => item.lease),
    outcomes,
  );
  if (outcomes.some((outcome) => outcome.kind === "accepted")) deps.faults?.afterBroadcast?.();
  if (outcomes.some((outcome) => outcome.kind !== "refused")) deps.onInFlight();
  for (const [n, { index }] of leases.entries()) {
    if (outcomes[n]!.kind === "refused")
      results[index] = { kind: "refused", reason: X402_REASONS.unexpectedSettleError };
  }
  return results;
}

/** Ends claims nothing was signed for, so the payment can be presented again. */
async function release(db: Db, items: Claimed[]): Promise<void> {
  for (const item of items) {
    await db.execute(sql`delete from x402_settlements where id = ${item.id} and tx_id is null`);
  }
}

type Receipt = { status: "confirmed" | "reverted"; feeWei: bigint; blockNumber: bigint };

/** Polls for the receipt until the deadline; undefined when none came in time. */
async function waitForReceipt(deps: SettlerDeps, txHash: Hex): Promise<Receipt | undefined> {
  const deadline = Date.now() + deps.receiptTimeoutMs;
  for (;;) {
    const answer = await deps.rpc.send({
      jsonrpc: "2.0",
      id: 1,
      method: "eth_getTransactionReceipt",
      params: [txHash],
    });
    const receipt = answer.ok
      ? ((
          answer.body as {
            result?: {
              status?: string;
              gasUsed?: string;
              effectiveGasPrice?: string;
              blockNumber?: string;
            } | null;
          }
        ).result ?? null)
      : null;
    if (receipt?.status && receipt.blockNumber) {
      return {
        status: receipt.status === "0x1" ? "confirmed" : "reverted",
        feeWei: BigInt(receipt.gasUsed ?? "0x0") * BigInt(receipt.effectiveGasPrice ?? "0x0"),
        blockNumber: BigInt(receipt.blockNumber),
      };
    }
    if (Date.now() >= deadline) return undefined;
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}
