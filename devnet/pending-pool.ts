/**
 * Transactions accepted by eth_sendRawTransaction and not yet mined or refused: waiting for the
 * next block, or in the block being built. Each carries its caller's answer, given once the
 * transaction's block is in the store (so its receipt is there when the call returns) or once
 * it is refused. Transactions that arrive while a block is being built wait here together and
 * go into the next block as a group (group commit).
 */
import type { Address } from "@ethereumjs/util";
import type { Hex } from "./hex.ts";
import { ok, type Result } from "./result.ts";
import type { SupportedTx } from "./rpc-format.ts";
import type { TxRejection } from "./tx-admission.ts";

export type SendResult = Result<Hex, TxRejection>;

export type Submission = {
  hash: Hex;
  tx: SupportedTx;
  sender: Address;
  /** Undefined for a transaction promoted from the future queue: its caller was answered then. */
  caller: { resolve(result: SendResult): void; reject(error: unknown): void } | undefined;
};

export class PendingPool {
  /** Arrival order; taken whole by the next block. */
  #waiting: Submission[] = [];
  /** Taken by a block and not yet answered. */
  readonly #inFlight = new Set<Submission>();
  readonly #byHash = new Map<Hex, Submission>();

  get(hash: Hex): Submission | undefined {
    return this.#byHash.get(hash);
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  /** Queues a new transaction for the next block; resolves when it is mined or refused. */
  submit(entry: Omit<Submission, "caller">): Promise<SendResult> {
    return new Promise((resolve, reject) => {
      const submission: Submission = { ...entry, caller: { resolve, reject } };
      this.#waiting.push(submission);
      this.#byHash.set(entry.hash, submission);
    });
  }

  /**
   * Everything waiting, for the block about to be built: in arrival order, except that each
   * sender's transactions are put in nonce order (within the places they hold), so nonces n and
   * n+1 sent at once and received swapped still both go into this block.
   */
  takeAll(): Submission[] {
    const taken = inNonceOrderPerSender(this.#waiting);
    this.#waiting = [];
    for (const entry of taken) this.#inFlight.add(entry);
    return taken;
  }

  /** Tracks a queued transaction the block is about to include, so it stays visible by hash. */
  adopt(entry: Omit<Submission, "caller">): Submission {
    const submission: Submission = { ...entry, caller: undefined };
    this.#inFlight.add(submission);
    this.#byHash.set(entry.hash, submission);
    return submission;
  }

  /** Answers the caller and forgets the transaction: it is mined, refused, or in the future queue. */
  settle(entry: Submission, result: SendResult): void {
    this.#forget(entry);
    entry.caller?.resolve(result);
  }

  /** Mined: the block holding `entries` is in the store. */
  settleMined(entries: readonly Submission[]): void {
    for (const entry of entries) this.settle(entry, ok(entry.hash));
  }

  /** A bug stopped block building: every caller still in flight gets the error. */
  failInFlight(error: unknown): void {
    for (const entry of [...this.#inFlight]) {
      this.#forget(entry);
      entry.caller?.reject(error);
    }
  }

  #forget(entry: Submission): void {
    this.#inFlight.delete(entry);
    if (this.#byHash.get(entry.hash) === entry) this.#byHash.delete(entry.hash);
  }
}

function inNonceOrderPerSender(entries: readonly Submission[]): Submission[] {
  const bySender = new Map<string, Submission[]>();
  for (const entry of entries) {
    const key = entry.sender.toString();
    const list = bySender.get(key);
    if (list === undefined) bySender.set(key, [entry]);
    else list.push(entry);
  }
  // Array.prototype.sort is stable: the same nonce twice keeps arrival order (the first wins).
  for (const list of bySender.values()) {
    list.sort((a, b) => (a.tx.nonce < b.tx.nonce ? -1 : a.tx.nonce > b.tx.nonce ? 1 : 0));
  }
  const next = new Map<string, number>();
  return entries.map((entry) => {
    const key = entry.sender.toString();
    const i = next.get(key) ?? 0;
    next.set(key, i + 1);
    return bySender.get(key)![i]!;
  });
}
