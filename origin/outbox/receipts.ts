/**
 * Following the service's own transactions to their receipts. After a batch broadcast (sender.ts
 * sendRawBatch), the receipts of all of them are read in one JSON-RPC batch (a node that mines on
 * arrival, as the devnet does, has them at once; and a node that answered with an error may have
 * taken the bytes all the same) and recorded with the broadcast in one statement (store.ts
 * recordMined from `signed`); what has no receipt yet is recorded with its broadcast's answer
 * (recordBroadcasts), for the tracker (tracker.ts) to follow. A caller that must answer with the
 * receipt waits for it here too (waitForReceipt).
 */
import { errorMessage } from "../../shared/error-message.ts";
import type { Hex } from "../../shared/hex.ts";
import { sleep } from "../../shared/sleep.ts";
import { ethGetTransactionReceipt } from "../chain/eth-calls.ts";
import { sendRpcBatch, sendRpcCall } from "../chain/json-rpc-call.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { Db } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import type { BroadcastLease, BroadcastOutcome, MinedTransaction, ReceiptOutcome } from "./intent.ts";
import type { OutboxStore } from "./store.ts";

/**
 * The receipts the chain has now for these transactions, in one JSON-RPC batch; none when the
 * chain did not answer.
 */
export async function readReceipts(
  rpc: JsonRpcUpstream,
  txHashes: readonly Hex[],
): Promise<Map<string, ReceiptOutcome>> {
  const receipts = new Map<string, ReceiptOutcome>();
  for (const [hash, receipt] of await readReceiptAnswers(rpc, txHashes)) {
    if (receipt) receipts.set(hash, receipt);
  }
  return receipts;
}

/**
 * What the chain answered of each transaction's receipt, in one JSON-RPC batch: its receipt, or
 * null when the chain said it has none. A transaction whose read failed (no answer, an error, an
 * answer for the other items of the batch only) is left out: that says nothing of it, and is never
 * "no receipt" (decide.ts ends an unmined transaction only on the chain's own word).
 */
export async function readReceiptAnswers(
  rpc: JsonRpcUpstream,
  txHashes: readonly Hex[],
): Promise<Map<string, ReceiptOutcome | null>> {
  const answers = new Map<string, ReceiptOutcome | null>();
  const results = await sendRpcBatch(
    rpc,
    txHashes.map((hash) => ethGetTransactionReceipt(hash)),
  );
  for (const [n, result] of results.entries()) {
    if (result.ok) answers.set(txHashes[n]!, result.value);
  }
  return answers;
}

export type SentBatchDeps = {
  db: Db;
  /** Where the broadcasts' answers and the receipts are recorded. */
  store: OutboxStore;
  rpc: JsonRpcUpstream;
  logger: Logger;
  /** Called when something is left in flight, so the tracker looks for it soon. */
  onInFlight?: (() => void) | undefined;
  /** Who is recording, for the log line of a failed record (e.g. "x402 settle"). */
  context: string;
};

/**
 * Reads the receipts of the broadcast transactions, whatever their answers, and records every
 * lease's outcome; returns the receipts by transaction hash. A record that fails (the database gone
 * for a moment) is logged and left to the tracker, which finds the same facts on chain: the
 * transactions are out either way.
 */
export async function recordSentBatch(
  deps: SentBatchDeps,
  leases: readonly BroadcastLease[],
  sent: readonly BroadcastOutcome[],
): Promise<Map<string, ReceiptOutcome>> {
  const receipts = await readReceipts(
    deps.rpc,
    leases.map((lease) => lease.txHash as Hex),
  );
  const mined: MinedTransaction[] = [];
  const unmined: number[] = [];
  for (const [n, lease] of leases.entries()) {
    const receipt = receipts.get(lease.txHash);
    if (receipt) mined.push({ txId: lease.txId, ...receipt });
    else unmined.push(n);
  }
  await Promise.all([
    bookkeep(deps, "recording the receipts", () =>
      deps.store.recordMined(deps.db, mined, { broadcast: true }),
    ),
    bookkeep(deps, "recording the broadcast", () =>
      deps.store.recordBroadcasts(
        deps.db,
        unmined.map((n) => leases[n]!),
        unmined.map((n) => sent[n]!),
      ),
    ),
  ]);
  if (unmined.length > 0) deps.onInFlight?.();
  return receipts;
}

/** Records what the chain already did; a failure changes nothing the caller is told. */
export async function bookkeep(
  deps: Pick<SentBatchDeps, "logger" | "onInFlight" | "context">,
  what: string,
  record: () => Promise<void>,
): Promise<void> {
  try {
    await record();
  } catch (error) {
    deps.logger.warn(
      { err: { message: errorMessage(error) } },
      `${deps.context}: ${what} failed; the transaction tracker will`,
    );
    deps.onInFlight?.();
  }
}

/** How often a caller waiting for one receipt asks for it. */
const RECEIPT_POLL_MS = 50;

/**
 * Polls for one transaction's receipt until `timeoutMs` has passed, or `signal` aborts; undefined
 * when none came by then.
 */
export async function waitForReceipt(
  rpc: JsonRpcUpstream,
  txHash: Hex,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<ReceiptOutcome | undefined> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const receipt = await sendRpcCall(rpc, ethGetTransactionReceipt(txHash));
    if (receipt.ok && receipt.value) return receipt.value;
    if (Date.now() >= deadline || signal?.aborted) return undefined;
    await sleep(RECEIPT_POLL_MS, signal);
  }
}
