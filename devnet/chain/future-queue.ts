/**
 * Transactions whose nonce is ahead of their sender's account nonce. The devnet mines every
 * executable transaction in the next block, but a client may send n+1 before n; like geth's
 * queue, n+1 waits here until n is mined, then joins n's block when it fits.
 */
import type { Address } from "@ethereumjs/util";
import { err, ok, type Result } from "../../shared/result.ts";
import type { Hex } from "../hex.ts";
import type { SupportedTx } from "../rpc/format.ts";
import type { Caller } from "./pending-pool.ts";

export type QueuedTx = {
  hash: Hex;
  tx: SupportedTx;
  sender: Address;
  /**
   * The caller of eth_sendRawTransaction, while still waiting: a transaction queued during a block
   * run is answered when that run ends, or, if the run fills its gap, once it is mined.
   */
  caller?: Caller;
};

export type QueueRejection = "sender_queue_full" | "queue_full" | "replacement_underpriced";

const MAX_PER_SENDER = 64;
const MAX_TOTAL = 4096;

export class FutureQueue {
  readonly #bySender = new Map<string, Map<bigint, QueuedTx>>();
  readonly #byHash = new Map<Hex, QueuedTx>();

  get size(): number {
    return this.#byHash.size;
  }

  get(hash: Hex): QueuedTx | undefined {
    return this.#byHash.get(hash);
  }

  /** Queues `entry`; a second transaction for the same nonce must raise both fees by 10 %, as in geth. */
  add(entry: QueuedTx): Result<void, QueueRejection> {
    const key = entry.sender.toString();
    const slots = this.#bySender.get(key) ?? new Map<bigint, QueuedTx>();
    const existing = slots.get(entry.tx.nonce);
    if (existing !== undefined) {
      if (!outbids(entry.tx, existing.tx)) return err("replacement_underpriced");
      this.#byHash.delete(existing.hash);
    } else {
      if (slots.size >= MAX_PER_SENDER) return err("sender_queue_full");
      if (this.#byHash.size >= MAX_TOTAL) return err("queue_full");
    }
    slots.set(entry.tx.nonce, entry);
    this.#bySender.set(key, slots);
    this.#byHash.set(entry.hash, entry);
    return ok(undefined);
  }

  /** Removes and returns the queued transaction of `sender` with `nonce`, dropping any below it. */
  take(sender: Address, nonce: bigint): QueuedTx | undefined {
    const key = sender.toString();
    const slots = this.#bySender.get(key);
    if (slots === undefined) return undefined;
    for (const [queuedNonce, entry] of slots) {
      if (queuedNonce < nonce) {
        slots.delete(queuedNonce);
        this.#byHash.delete(entry.hash);
      }
    }
    const found = slots.get(nonce);
    if (found !== undefined) {
      slots.delete(nonce);
      this.#byHash.delete(found.hash);
    }
    if (slots.size === 0) this.#bySender.delete(key);
    return found;
  }
}

/** geth's txpool.pricebump default: a replacement pays this many percent more. */
const PRICE_BUMP_PERCENT = 10n;

/**
 * geth's rule (legacypool's list.Add): both the fee cap and the tip strictly higher than the
 * current ones, and each at least the current one × 110 / 100, rounded down.
 */
function outbids(next: SupportedTx, current: SupportedTx): boolean {
  const [nextCap, nextTip] = feeCaps(next);
  const [cap, tip] = feeCaps(current);
  if (nextCap <= cap || nextTip <= tip) return false;
  const threshold = (fee: bigint): bigint => (fee * (100n + PRICE_BUMP_PERCENT)) / 100n;
  return nextCap >= threshold(cap) && nextTip >= threshold(tip);
}

function feeCaps(tx: SupportedTx): [bigint, bigint] {
  return "maxFeePerGas" in tx ? [tx.maxFeePerGas, tx.maxPriorityFeePerGas] : [tx.gasPrice, tx.gasPrice];
}
