/**
 * Transactions accepted by eth_sendRawTransaction and not yet mined or refused: waiting for the
 * next block, or in the block being built. Each carries its caller's answer, given once the
 * transaction's block is in the store (so its receipt is there when the call returns) or once
 * it is refused. Transactions that arrive while a block is being built wait here together and
 * go into the next block as a group (group commit).
 */
import type { Address } from "@ethereumjs/util";
import { ok, type Result } from "../../shared/result.ts";
import type { Hex } from "../hex.ts";
import type { SupportedTx } from "../rpc/format.ts";
import type { TxRejection } from "./tx-admission.ts";

export type SendResult = Result<Hex, TxRejection>;

export type Caller = { resolve(result: SendResult): void; reject(error: unknown): void };

export type Submission = {
  hash: Hex;
  tx: SupportedTx;
  /**
   * The sender, or why the transaction is refused before any state check. Pending while its
   * signature is recovered (on a worker): blocks take submissions in arrival order and wait
   * for each in turn.
   */
  admitted: Promise<Result<Address, TxRejection>>;
  /** Set once `admitted` resolves to a sender. */
  sender: Address | undefined;
  /** Undefined once answered (a queued transaction's caller may have been answered already). */
  caller: Caller | undefined;
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

  /** Queues a new transaction for the next block; resolves when it is mined or refused. */
  submit(entry: {
    hash: Hex;
    tx: SupportedTx;
    admitted: Promise<Result<Address, TxRejection>>;
  }): Promise<SendResult> {
    return new Promise((resolve, reject) => {
      const submission: Submission = { ...entry, sender: undefined, caller: { resolve, reject } };
      entry.admitted.then((admitted) => {
        if (admitted.ok) submission.sender = admitted.value;
      });
      this.#waiting.push(submission);
      this.#byHash.set(entry.hash, submission);
    });
  }

  /** Everything waiting, in arrival order, for the block about to be built. */
  takeAll(): Submission[] {
    const taken = this.#waiting;
    this.#waiting = [];
    for (const entry of taken) this.#inFlight.add(entry);
    return taken;
  }

  /**
   * Tracks a transaction leaving the future queue for the block being built, so it stays
   * visible by hash; its caller, if still waiting, is answered when it is mined or refused.
   */
  adopt(entry: { hash: Hex; tx: SupportedTx; sender: Address; caller: Caller | undefined }): Submission {
    const submission: Submission = { ...entry, admitted: Promise.resolve(ok(entry.sender)) };
    this.#inFlight.add(submission);
    this.#byHash.set(entry.hash, submission);
    return submission;
  }

  /** Forgets the transaction (mined, refused, or moved to the future queue) and answers its caller if given a result. */
  settle(entry: Submission, result: SendResult | undefined): void {
    this.#inFlight.delete(entry);
    if (this.#byHash.get(entry.hash) === entry) this.#byHash.delete(entry.hash);
    if (result === undefined) return;
    entry.caller?.resolve(result);
    entry.caller = undefined;
  }

  /** Mined: the block holding `entries` is in the store. */
  settleMined(entries: readonly Submission[]): void {
    for (const entry of entries) this.settle(entry, ok(entry.hash));
  }

  /** A bug stopped block building: every caller still in flight gets the error. */
  failInFlight(error: unknown): void {
    for (const entry of [...this.#inFlight]) {
      this.settle(entry, undefined);
      entry.caller?.reject(error);
      entry.caller = undefined;
    }
  }
}
