/**
 * Broadcasts stored, signed transactions in the order they were signed, off the path of the
 * requests that signed them (actions/execute.ts answers those once the transactions are stored,
 * and hands them here). One JSON-RPC batch is on its way to the chain at a time; whatever is
 * queued meanwhile leaves together in the next (a node mines what arrives together in one block),
 * so each sender's nonces reach the chain in order. Once the chain has taken a batch, its receipts
 * are read and recorded (receipts.ts) while the next one goes.
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
import type { BroadcastLease } from "./intent.ts";
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

export type BroadcastLane = {
  /** Queues stored transactions behind everything queued before them. */
  send(leases: readonly BroadcastLease[]): void;
  /** Resolves once fewer than `maxWaiting` transactions wait for the chain. */
  room(): Promise<void>;
  /** Resolves once nothing is queued, on its way to the chain or being recorded (a drain). */
  idle(): Promise<void>;
};

export function createBroadcastLane(deps: BroadcastLaneDeps): BroadcastLane {
  let queued: BroadcastLease[] = [];
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
    const leases = queued;
    queued = [];
    onTheWay = leases.length;
    try {
      const broadcasts = await sendRawBatch(deps.rpc, leases);
      broadcasts.forEach((outcome, n) => {
        if (outcome.kind === "refused") {
          deps.logger.warn(
            { tx_id: leases[n]!.txId, tx_hash: leases[n]!.txHash, reason: outcome.reason },
            "chain refused a signed transaction",
          );
        }
      });
      // Reading or recording the receipts may fail: the tracker then follows what was sent.
      const recorded = bookkeep(deps, "following a broadcast", async () => {
        await recordSentBatch(deps, leases, broadcasts);
      }).finally(() => {
        recording.delete(recorded);
        settleWaiters();
      });
      recording.add(recorded);
    } catch (error) {
      // A bug (sendRawBatch answers failures as outcomes): the transactions stay stored, for the tracker.
      deps.logger.error(
        { err: { message: errorMessage(error) } },
        `${deps.context}: broadcasting failed; the transaction tracker will`,
      );
      deps.onInFlight?.();
    } finally {
      onTheWay = 0;
      settleWaiters();
      void pump();
    }
  };

  return {
    send(leases) {
      if (leases.length === 0) return;
      queued.push(...leases);
      void pump();
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
