/**
 * Broadcasting stored transactions: one JSON-RPC batch for many (a node mines what arrives together
 * in one block), each answer read for what it proves (broadcast-answers.ts), and the outcome
 * recorded with the lease ended (store.ts). No answer ends a transaction or hands its nonce out
 * again: a transaction leaves `submitted` only with a receipt, or once another transaction took its
 * nonce (decide.ts).
 */
import { ethSendRawTransaction } from "../chain/eth-calls.ts";
import { sendRpcBatch, sendRpcCall } from "../chain/json-rpc-call.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { Db } from "../db/client.ts";
import { classifyBroadcast } from "./broadcast-answers.ts";
import type { BroadcastLease, BroadcastOutcome } from "./intent.ts";
import { claimBroadcast, type OutboxStore } from "./store.ts";

/**
 * Sends many transactions in one JSON-RPC batch and reads each answer (broadcast-answers.ts); a
 * failed round trip, or an answer that is no batch, leaves every one of them unknown: the request
 * may have reached the node before the failure.
 */
export async function sendRawBatch(
  rpc: JsonRpcUpstream,
  txs: readonly { rawTx: string }[],
): Promise<BroadcastOutcome[]> {
  const answers = await sendRpcBatch(
    rpc,
    txs.map((tx) => ethSendRawTransaction(tx.rawTx)),
  );
  return answers.map(classifyBroadcast);
}

/** Sends raw bytes and reads the answer (broadcast-answers.ts). */
export async function sendRaw(rpc: JsonRpcUpstream, rawTx: string): Promise<BroadcastOutcome> {
  return classifyBroadcast(await sendRpcCall(rpc, ethSendRawTransaction(rawTx)));
}

/**
 * Sends the leased bytes, with no database lock held while the chain answers, then records how
 * they were answered and ends the lease (store.ts recordBroadcasts).
 */
export async function broadcastLeased(deps: BroadcastDeps, lease: BroadcastLease): Promise<BroadcastOutcome> {
  const outcome = await sendRaw(deps.rpc, lease.rawTx);
  await deps.store.recordBroadcasts(deps.db, [lease], [outcome]);
  return outcome;
}

/** What a broadcast of a stored transaction needs: the chain, and where its answer is recorded. */
export type BroadcastDeps = { db: Db; rpc: JsonRpcUpstream; store: OutboxStore };

/** Claims and broadcasts one stored transaction; undefined if another broadcast holds it. */
export async function broadcastStored(
  deps: BroadcastDeps,
  txId: string,
  options: { leaseMs: number },
): Promise<BroadcastOutcome | undefined> {
  const lease = await claimBroadcast(deps.db, txId, options);
  return lease ? broadcastLeased(deps, lease) : undefined;
}
