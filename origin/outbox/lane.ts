/**
 * The node's one broadcast lane: stored, signed transactions leave in the order they were signed,
 * whichever domain signed them (batch.ts hands them here once their batch has committed: money's
 * transfers and payouts, x402's settlements). One JSON-RPC batch is on its way to the chain at a
 * time; whatever is queued meanwhile leaves together in the next (a node mines what arrives
 * together in one block), so each sender's nonces reach the chain in order. Once the chain has
 * taken a batch, its receipts are read and recorded (receipts.ts) while the next one goes.
 *
 * Each transaction sent gets back how its broadcast went and the receipt read right after it: a
 * caller that answers with the receipt (x402's settle) waits for those, one that answers once the
 * transaction is stored (money) does not.
 *
 * Nothing here is the only copy: the transactions are stored as `signed` with a broadcast lease
 * before they are queued. A broadcast that fails or never happens (a crash) is the transaction
 * tracker's to repeat, from the same bytes, once the lease has run out; the lease outlasts the wait
 * here (at most the batch on its way, then this one's own round trip: two chain timeouts of the
 * lease's three).
 */

import { errorMessage } from "../../shared/error-message.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { Logger } from "../logger.ts";
import type { BroadcastLease, BroadcastOutcome, ReceiptOutcome } from "./intent.ts";
import { bookkeep, recordSentBatch, type SentBatchDeps } from "./receipts.ts";
import { sendRawBatch } from "./sender.ts";

export type BroadcastLaneDeps = SentBatchDeps & {
  rpc: JsonRpcUpstream;
  logger: Logger;
  /**
   * At most this many transactions wait for the chain: `room()` holds the signer back beyond it,
   * so a chain slower than signing slows the answers rather than piling up signed transactions.
   */
  maxWaiting: number;
};

/** How one transaction's broadcast went. */
export type LaneOutcome = {
  outcome: BroadcastOutcome;
  /**
   * The receipt read right after the broadcast, once it is recorded (or its recording failed);
   * undefined when the chain had none yet. Never rejects.
   */
  receipt: Promise<ReceiptOutcome | undefined>;
};

export type BroadcastLane = {
  /**
   * Queues stored transactions behind everything queued before them; one promise per lease, of
   * how its broadcast went (never rejects).
   */
  send(leases: readonly BroadcastLease[]): Promise<LaneOutcome>[];
  /** Resolves once fewer than `maxWaiting` transactions wait for the chain. */
  room(): Promise<void>;
  /** Resolves once nothing is queued, on its way to the chain or being recorded (a drain). */
  idle(): Promise<void>;
};

export function createBroadcastLane(deps: BroadcastLaneDeps): BroadcastLane {
  type Queued = { lease: BroadcastLease; sent: (outcome: LaneOutcome) => void };
  let queued: Queued[] = [];
  /** The transactions of the JSON-RPC batch on its way (0: none is). */
  let onTheWay = 0;
  const waiting = (): number => queued.length + onTheWay;
  let roomWaiters: Array<() => void> = [];
  const recording = new Set<Promise<unknown>>();
  let idleWaiters: Array<() => void> = [];

  const settleWaiters = (): void => {
    if (waiting() < deps.maxWaiting) {
      const woken = roomWaiters;
      roomWaiters = [];
      for (const wake of woken) wake();
    }
    if (waiting() === 0 && recording.size === 0) {
      const woken = idleWaiters;
      idleWaiters = [];
      for (const wake of woken) wake();
    }
  };

  const pump = async (): Promise<void> => {
    if (onTheWay > 0 || queued.length === 0) return;
    const batch = queued;
    queued = [];
    onTheWay = batch.length;
    const leases = batch.map((item) => item.lease);
    try {
      const broadcasts = await sendRawBatch(deps.rpc, leases);
      broadcasts.forEach((outcome, n) => {
        if (outcome.kind !== "accepted") {
          deps.logger.warn(
            {
              tx_id: leases[n]!.txId,
              tx_hash: leases[n]!.txHash,
              outcome: outcome.kind,
              reason: outcome.reason,
            },
            "a node did not accept a signed transaction; it stays in flight until the chain decides",
          );
        }
      });
      // Reading or recording the receipts may fail: the tracker then follows what was sent.
      let receipts = new Map<string, ReceiptOutcome>();
      const recorded = bookkeep(deps, "following a broadcast", async () => {
        receipts = await recordSentBatch(deps, leases, broadcasts);
      }).finally(() => {
        recording.delete(recorded);
        settleWaiters();
      });
      recording.add(recorded);
      batch.forEach((item, n) => {
        item.sent({
          outcome: broadcasts[n]!,
          receipt: recorded.then(() => receipts.get(item.lease.txHash)),
        });
      });
    } catch (error) {
      // A bug (sendRawBatch answers failures as outcomes): the transactions stay stored, for the tracker.
      deps.logger.error(
        { err: { message: errorMessage(error) } },
        `${deps.context}: broadcasting failed; the transaction tracker will`,
      );
      deps.onInFlight?.();
      const outcome: BroadcastOutcome = { kind: "unknown", reason: errorMessage(error) };
      for (const item of batch) item.sent({ outcome, receipt: Promise.resolve(undefined) });
    } finally {
      onTheWay = 0;
      settleWaiters();
      void pump();
    }
  };

  return {
    send(leases) {
      if (leases.length === 0) return [];
      const sent = leases.map(
        (lease) =>
          new Promise<LaneOutcome>((resolve) => {
            queued.push({ lease, sent: resolve });
          }),
      );
      void pump();
      return sent;
    },
    async room() {
      while (waiting() >= deps.maxWaiting) await new Promise<void>((resolve) => roomWaiters.push(resolve));
    },
    async idle() {
      if (waiting() === 0 && recording.size === 0) return;
      await new Promise<void>((resolve) => idleWaiters.push(resolve));
    },
  };
}
