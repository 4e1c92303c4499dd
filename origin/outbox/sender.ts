/**
 * Broadcasting stored transactions: one JSON-RPC batch for many (a node mines what arrives together
 * in one block), each answer classified in geth's words as accepted, transient or refused, and the
 * outcome recorded with the lease ended (store.ts).
 */
import { sql } from "drizzle-orm";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { Db } from "../db/client.ts";
import type { BroadcastLease, BroadcastOutcome } from "./intent.ts";
import { claimBroadcast, releaseNonceIfLast, setTxStatus } from "./store.ts";

/**
 * Sends many transactions in one JSON-RPC batch (a node mines what arrives together in one block)
 * and classifies each answer as sendRaw does; a failed round trip is transient for all of them.
 */
export async function sendRawBatch(
  rpc: JsonRpcUpstream,
  txs: readonly { rawTx: string; txHash: string }[],
): Promise<BroadcastOutcome[]> {
  if (txs.length === 0) return [];
  const result = await rpc.send(
    txs.map((tx, index) => ({
      jsonrpc: "2.0",
      id: index,
      method: "eth_sendRawTransaction",
      params: [tx.rawTx],
    })),
  );
  if (!result.ok || !Array.isArray(result.value)) {
    const reason = result.ok ? "chain bad_body" : `chain ${result.error}`;
    return txs.map(() => ({ kind: "transient", reason }));
  }
  const byId = new Map((result.value as { id?: unknown }[]).map((item) => [item.id, item]));
  return Promise.all(
    txs.map((tx, index) =>
      classifySend(rpc, byId.get(index) ?? { error: { message: "no answer" } }, tx.txHash),
    ),
  );
}

/** Sends raw bytes and classifies the answer in geth's words (the devnet words them the same). */
export async function sendRaw(
  rpc: JsonRpcUpstream,
  rawTx: string,
  txHash: string,
): Promise<BroadcastOutcome> {
  const result = await rpc.send({ jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [rawTx] });
  if (!result.ok) return { kind: "transient", reason: `chain ${result.error}` };
  return classifySend(rpc, result.value, txHash);
}

async function classifySend(
  rpc: JsonRpcUpstream,
  answer: unknown,
  txHash: string,
): Promise<BroadcastOutcome> {
  const body = answer as { result?: unknown; error?: { message?: unknown } };
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
    if (!receipt.ok) return { kind: "transient", reason: `chain ${receipt.error}` };
    const mined = (receipt.value as { result?: unknown }).result;
    return mined ? { kind: "accepted" } : { kind: "refused", reason: message };
  }
  if (/txpool is full|underpriced|timeout|try again/i.test(message))
    return { kind: "transient", reason: message };
  return { kind: "refused", reason: message };
}

/**
 * Sends the leased bytes, with no database lock held while the chain answers, then records the
 * outcome and ends the lease: `signed` becomes `submitted` on acceptance and `failed` on a refusal
 * (its nonce handed out again if nothing came after it); a transient failure leaves it as it was
 * for the tracker to send again.
 */
export async function broadcastLeased(
  db: Db,
  rpc: JsonRpcUpstream,
  lease: BroadcastLease,
): Promise<BroadcastOutcome> {
  const outcome = await sendRaw(rpc, lease.rawTx, lease.txHash);
  if (outcome.kind === "transient") {
    // updated_at moves too: the tracker's next attempt waits a full grace period.
    await db.execute(sql`update outgoing_transactions
        set broadcast_attempts = broadcast_attempts + 1, error = ${outcome.reason}, updated_at = now(),
            broadcast_lease_until = null
        where tx_id = ${lease.txId}`);
    return outcome;
  }
  if (outcome.kind === "accepted") {
    await setTxStatus(db, [lease.txId], lease.status === "signed" ? "submitted" : lease.status, {
      countBroadcast: true,
    });
    return outcome;
  }
  await db.transaction(async (tx) => {
    await setTxStatus(tx, [lease.txId], "failed", { error: outcome.reason, countBroadcast: true });
    await releaseNonceIfLast(tx, lease.txId);
  });
  return outcome;
}

/** Claims and broadcasts one stored transaction; undefined if another broadcast holds it. */
export async function broadcastStored(
  db: Db,
  rpc: JsonRpcUpstream,
  txId: string,
  options: { leaseMs: number; resend?: boolean },
): Promise<BroadcastOutcome | undefined> {
  const lease = await claimBroadcast(db, txId, options);
  return lease ? broadcastLeased(db, rpc, lease) : undefined;
}
