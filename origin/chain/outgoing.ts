/**
 * The service's own transactions (DESIGN §4): nonces handed out under a row lock per sending
 * address, signed bytes stored before they are broadcast, and broadcasts that never overlap for
 * one transaction. Faucet payouts, transfers and x402 settlements all go through here.
 */
import { eq, inArray, sql } from "drizzle-orm";
import type { Hex } from "../../shared/hex.ts";
import { type Db, queryRows } from "../db/client.ts";
import { agentActions, outgoingTransactions, senderNonces } from "../db/schema.ts";
import type { JsonRpcUpstream } from "./json-rpc-upstream.ts";

export type TxPurpose = "faucet" | "transfer" | "settlement" | "filler";
export type TxStatus = "signed" | "submitted" | "confirmed" | "reverted" | "failed";

/** What the chain says of a sender right now: its mined nonce and its balance. */
export type SenderView = { minedNonce: bigint; balanceWei: bigint };

/**
 * Reads the sender's mined nonce, then its balance, both at `latest`. In that order a
 * transaction mined between the two reads is both in the balance and above the nonce, so it is
 * counted twice as in flight (a refusal too many), never missed (an overdraft).
 */
export async function readBalance(rpc: JsonRpcUpstream, address: string): Promise<bigint | undefined> {
  return rpcQuantity(rpc, "eth_getBalance", [address, "latest"]);
}

export async function readSenderView(rpc: JsonRpcUpstream, address: string): Promise<SenderView | undefined> {
  const nonce = await rpcQuantity(rpc, "eth_getTransactionCount", [address, "latest"]);
  if (nonce === undefined) return undefined;
  const balance = await rpcQuantity(rpc, "eth_getBalance", [address, "latest"]);
  if (balance === undefined) return undefined;
  return { minedNonce: nonce, balanceWei: balance };
}

/**
 * Locks `address`'s nonce row for the rest of the transaction and returns the next nonce to use:
 * the stored one, or the chain's if the chain is ahead (a first use, or a transaction sent
 * without us). Concurrent callers for one address wait here, so each gets its own nonce.
 */
export async function lockNextNonce(tx: Db, address: string, minedNonce: bigint): Promise<bigint> {
  const [row] = await queryRows<{ next_nonce: string }>(
    tx,
    sql`insert into sender_nonces (address, next_nonce) values (${address}, ${minedNonce})
        on conflict (address) do update
          set next_nonce = greatest(sender_nonces.next_nonce, excluded.next_nonce), updated_at = now()
        returning next_nonce`,
  );
  return BigInt(row!.next_nonce);
}

/**
 * The most that `address`'s transactions not yet mined can still take from it: those at or above
 * the mined nonce that are signed or submitted, each counted at value plus its maximum fee.
 */
export async function inFlightCostWei(tx: Db, address: string, minedNonce: bigint): Promise<bigint> {
  const [row] = await queryRows<{ total: string | null }>(
    tx,
    sql`select sum(max_cost_wei)::text as total from outgoing_transactions
        where sender = ${address} and nonce >= ${minedNonce} and status in ('signed', 'submitted')`,
  );
  return BigInt(row?.total ?? "0");
}

export type SignedTransaction = {
  purpose: TxPurpose;
  sender: string;
  nonce: bigint;
  txHash: Hex;
  rawTx: Hex;
  maxCostWei: bigint;
};

/**
 * Stores a signed transaction and moves its sender's next nonce past it, in the caller's
 * transaction (which holds the nonce row lock). Returns the new row's id.
 */
export async function recordSigned(tx: Db, signed: SignedTransaction): Promise<string> {
  const [row] = await tx
    .insert(outgoingTransactions)
    .values({
      purpose: signed.purpose,
      sender: signed.sender,
      nonce: signed.nonce,
      txHash: signed.txHash,
      rawTx: signed.rawTx,
      maxCostWei: signed.maxCostWei.toString(),
    })
    .returning({ txId: outgoingTransactions.txId });
  await tx
    .update(senderNonces)
    .set({ nextNonce: signed.nonce + 1n, updatedAt: sql`now()` })
    .where(eq(senderNonces.address, signed.sender));
  return row!.txId;
}

/** How the chain answered one broadcast. */
export type BroadcastOutcome =
  | { kind: "accepted" }
  /** Not sent or not answered (unreachable, timeout, a full pool): try again later. */
  | { kind: "transient"; reason: string }
  /** The chain will never take these bytes; nothing of them was spent. */
  | { kind: "refused"; reason: string };

/** Sends raw bytes and classifies the answer in geth's words (the devnet words them the same). */
export async function sendRaw(
  rpc: JsonRpcUpstream,
  rawTx: string,
  txHash: string,
): Promise<BroadcastOutcome> {
  const result = await rpc.send({ jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [rawTx] });
  if (!result.ok) return { kind: "transient", reason: `chain ${result.failure}` };
  const body = result.body as { result?: unknown; error?: { message?: unknown } };
  if (typeof body.result === "string") return { kind: "accepted" };
  const message = typeof body.error?.message === "string" ? body.error.message : "no result";
  if (/already known|known transaction/i.test(message)) return { kind: "accepted" };
  if (/nonce too low/i.test(message)) {
    // Mined already (an earlier broadcast got through) or another transaction took the nonce.
    const receipt = await rpc.send({
      jsonrpc: "2.0",
      id: 1,
      method: "eth_getTransactionReceipt",
      params: [txHash],
    });
    if (!receipt.ok) return { kind: "transient", reason: `chain ${receipt.failure}` };
    const mined = (receipt.body as { result?: unknown }).result;
    return mined ? { kind: "accepted" } : { kind: "refused", reason: message };
  }
  if (/txpool is full|underpriced|timeout|try again/i.test(message))
    return { kind: "transient", reason: message };
  return { kind: "refused", reason: message };
}

/**
 * Broadcasts one stored transaction, holding its row lock so no other origin broadcasts it at the
 * same time (they skip locked rows). `signed` becomes `submitted` on acceptance, `failed` on a
 * refusal; a transient failure leaves it `signed` for the tracker to send again. Also moves the
 * agent action that owns it, in the same transaction.
 */
export async function broadcastStored(
  db: Db,
  rpc: JsonRpcUpstream,
  txId: string,
  options: { resend?: boolean } = {},
): Promise<BroadcastOutcome | undefined> {
  return db.transaction(async (tx) => {
    const statuses: TxStatus[] = options.resend ? ["signed", "submitted"] : ["signed"];
    const [row] = await queryRows<{ raw_tx: string; tx_hash: string; status: TxStatus }>(
      tx,
      sql`select raw_tx, tx_hash, status from outgoing_transactions
          where tx_id = ${txId} and status in ${sql.raw(`('${statuses.join("','")}')`)}
          for update skip locked`,
    );
    if (!row) return undefined; // already broadcast, settled, or being broadcast elsewhere
    const outcome = await sendRaw(rpc, row.raw_tx, row.tx_hash);
    if (outcome.kind === "transient") {
      await tx
        .update(outgoingTransactions)
        // updated_at moves too: the tracker's next attempt waits a full grace period.
        .set({
          broadcastAttempts: sql`${outgoingTransactions.broadcastAttempts} + 1`,
          error: outcome.reason,
          updatedAt: sql`now()`,
        })
        .where(eq(outgoingTransactions.txId, txId));
      return outcome;
    }
    const status: TxStatus =
      outcome.kind === "accepted" ? (row.status === "signed" ? "submitted" : row.status) : "failed";
    await setTxStatus(tx, [txId], status, {
      error: outcome.kind === "refused" ? outcome.reason : null,
      countBroadcast: true,
    });
    if (outcome.kind === "refused") await releaseNonceIfLast(tx, txId);
    return outcome;
  });
}

/**
 * Moves transactions (and the agent actions they belong to) to `status`. The action's state is the
 * transaction's from `signed` on; both change in one statement so a reader never sees them differ.
 */
export async function setTxStatus(
  tx: Db,
  txIds: string[],
  status: TxStatus,
  fields: { error?: string | null; feeWei?: bigint; blockNumber?: bigint; countBroadcast?: boolean } = {},
): Promise<void> {
  if (txIds.length === 0) return;
  await tx
    .update(outgoingTransactions)
    .set({
      status,
      updatedAt: sql`now()`,
      ...(fields.error === undefined ? {} : { error: fields.error }),
      ...(fields.feeWei === undefined ? {} : { feeWei: fields.feeWei.toString() }),
      ...(fields.blockNumber === undefined ? {} : { blockNumber: fields.blockNumber }),
      ...(fields.countBroadcast
        ? { broadcastAttempts: sql`${outgoingTransactions.broadcastAttempts} + 1` }
        : {}),
    })
    .where(inArray(outgoingTransactions.txId, txIds));
  await tx
    .update(agentActions)
    .set({
      status,
      updatedAt: sql`now()`,
      ...(status === "failed" && fields.error
        ? { errorCode: "broadcast_refused", errorMessage: fields.error }
        : {}),
    })
    .where(inArray(agentActions.txId, txIds));
}

/**
 * A refused transaction leaves a hole at its nonce. If nothing was signed after it, the hole is
 * closed by handing the nonce out again; otherwise the later transactions wait behind it, and the
 * tracker fills it (fill-nonce-gaps in the tracker).
 */
async function releaseNonceIfLast(tx: Db, txId: string): Promise<void> {
  await tx.execute(sql`
    update sender_nonces set next_nonce = t.nonce, updated_at = now()
    from outgoing_transactions t
    where t.tx_id = ${txId} and sender_nonces.address = t.sender and sender_nonces.next_nonce = t.nonce + 1`);
}

async function rpcQuantity(
  rpc: JsonRpcUpstream,
  method: string,
  params: unknown[],
): Promise<bigint | undefined> {
  const result = await rpc.send({ jsonrpc: "2.0", id: 1, method, params });
  if (!result.ok) return undefined;
  const value = (result.body as { result?: unknown }).result;
  return typeof value === "string" && /^0x[0-9a-fA-F]+$/.test(value) ? BigInt(value) : undefined;
}
