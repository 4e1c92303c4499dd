/**
 * What follows a batch broadcast (outgoing.ts sendRawBatch) for the requests that sent it: the
 * receipts of what the chain took, read in one JSON-RPC batch (a node that mines on arrival, as the
 * devnet does, has them at once), recorded with the broadcast in one statement (recordMined from
 * `signed`); what has no receipt yet is recorded as its broadcast left it (recordBroadcastOutcomes),
 * for the transaction tracker to follow. Money actions (actions/execute.ts) and x402 settlements
 * (x402/settle.ts) both end their batches here.
 */
import type { Hex } from "../../shared/hex.ts";
import type { Db } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import type { JsonRpcUpstream } from "./json-rpc-upstream.ts";
import {
  type BroadcastLease,
  type BroadcastOutcome,
  type MinedTransaction,
  type ReceiptOutcome,
  readReceipts,
  recordBroadcastOutcomes,
  recordMined,
} from "./outgoing.ts";

export type SentBatchDeps = {
  db: Db;
  rpc: JsonRpcUpstream;
  logger: Logger;
  /** Called when something is left in flight, so the tracker looks for it soon. */
  onInFlight?: (() => void) | undefined;
  /** Who is recording, for the log line of a failed record (e.g. "x402 settle"). */
  context: string;
};

/**
 * Reads the receipts of the accepted broadcasts and records every lease's outcome; returns the
 * receipts by transaction hash. A record that fails (the database gone for a moment) is logged and
 * left to the tracker, which finds the same facts on chain: the transactions are out either way.
 */
export async function recordSentBatch(
  deps: SentBatchDeps,
  leases: readonly BroadcastLease[],
  sent: readonly BroadcastOutcome[],
): Promise<Map<string, ReceiptOutcome>> {
  const accepted = leases.filter((_, n) => sent[n]!.kind === "accepted");
  const receipts = await readReceipts(
    deps.rpc,
    accepted.map((lease) => lease.txHash as Hex),
  );
  const mined: MinedTransaction[] = [];
  const unmined: number[] = [];
  for (const [n, lease] of leases.entries()) {
    const receipt = sent[n]!.kind === "accepted" ? receipts.get(lease.txHash) : undefined;
    if (receipt) mined.push({ txId: lease.txId, ...receipt });
    else unmined.push(n);
  }
  await Promise.all([
    bookkeep(deps, "recording the receipts", () => recordMined(deps.db, mined, { broadcast: true })),
    bookkeep(deps, "recording the broadcast", () =>
      recordBroadcastOutcomes(
        deps.db,
        unmined.map((n) => leases[n]!),
        unmined.map((n) => sent[n]!),
      ),
    ),
  ]);
  if (unmined.some((n) => sent[n]!.kind !== "refused")) deps.onInFlight?.();
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
      { err: { message: error instanceof Error ? error.message : String(error) } },
      `${deps.context}: ${what} failed; the transaction tracker will`,
    );
    deps.onInFlight?.();
  }
}
