/**
 * The outbox as one service, built once by the composition root (compose.ts) from the domains'
 * parts: their followers (followers.ts), sweeps, sender key lookups and filler rows
 * (tracker-hooks.ts). It owns the store statements those parts are written into, the node's one
 * broadcast lane, the tracker, and the receipt waits; a domain runs its batches through it and
 * gets back what the chain did, and nothing of it is filled in module state.
 */
import type { Hex } from "../../shared/hex.ts";
import type { FeeOracle } from "../chain/fees.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { createBatcher } from "../db/batcher.ts";
import type { Db } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import { readSenderViews } from "./chain-reads.ts";
import { fillerKind } from "./fillers.ts";
import type { TxFollower } from "./followers.ts";
import type { ReceiptOutcome, SenderView } from "./intent.ts";
import { createBroadcastLane } from "./lane.ts";
import { bookkeep, waitForReceipt } from "./receipts.ts";
import { broadcastLeaseMs, createOutboxStore } from "./store.ts";
import {
  type BatchObserver,
  createSubmit,
  type KindSigner,
  type SentTransaction,
  type Submit,
} from "./submit.ts";
import { createTxTracker, type TxTracker, type TxTrackerOptions } from "./tracker.ts";
import type { TrackerHooks } from "./tracker-hooks.ts";

/** What the domains hand the outbox: how their rows follow transactions, and the tracker's hooks. */
export type OutboxDomains = TrackerHooks & { followers: readonly TxFollower[] };

export type OutboxDeps = {
  db: Db;
  rpc: JsonRpcUpstream;
  logger: Logger;
  /** The enclave: the ops the kinds' signing requests name, fillers' among them. */
  signer: KindSigner;
  fees: FeeOracle;
  /** The service's own senders by lowercase address (the treasury, the settler), for fillers. */
  serviceKeys: ReadonlyMap<string, string>;
  /** The chain client's timeout: a broadcast lease outlasts any broadcast (store.ts broadcastLeaseMs). */
  chainTimeoutMs: number;
  /** At most this many signed transactions wait for the chain before `room()` holds signing back. */
  maxWaiting: number;
  tracker?: TxTrackerOptions | undefined;
  /** Told each batch's size and the time of its steps (the origin's metrics). */
  observer?: BatchObserver | undefined;
};

export type Outbox = {
  /**
   * Runs an item of a kind (kind.ts) through the outbox's one path (submit.ts), batched with what
   * arrives together: its claim, the senders' nonce rows locked, its checks, its signature in
   * nonce order, what was signed stored with the kind's rows, the commit, then the broadcast on
   * the node's lane. Resolves with what became of it.
   */
  submit: Submit;
  /**
   * The receipt of a sent transaction: the one read right after its broadcast, or else waited for
   * until `timeoutMs` and recorded (with its followers); undefined when the chain had none by then,
   * and the tracker follows it.
   */
  receipt(sent: SentTransaction, options: { timeoutMs: number }): Promise<ReceiptOutcome | undefined>;
  /**
   * The origin stops: every receipt wait ends now, and any later one after its first read, each
   * undefined as at its timeout (an x402 settle then answers settlement_pending, the next origin's
   * tracker following the transaction), rather than outlast the server's drain and have its
   * request cut with no answer (main.ts's shutdown).
   */
  releaseReceiptWaits(): void;
  /** Aborts at releaseReceiptWaits: a presentation waiting on another's settlement ends with it. */
  stopping: AbortSignal;
  /** Resolves once nothing is queued, on its way to the chain or being recorded (a drain). */
  idle(): Promise<void>;
  /** Follows what is in flight to its end; its worker starts with the money capability's. */
  tracker: TxTracker;
};

/** Senders whose views one JSON-RPC batch reads: a batch's worth (actions/execute.ts). */
const SENDER_VIEWS_PER_READ = 64;
/** Reads on their way at once: as many as money's batches (actions/execute.ts). */
const SENDER_VIEW_READS_IN_FLIGHT = 2;

export function createOutbox(deps: OutboxDeps, domains: OutboxDomains): Outbox {
  const { db, rpc, logger } = deps;
  const leaseMs = broadcastLeaseMs(deps.chainTimeoutMs);
  const store = createOutboxStore(domains.followers);
  // The lane wakes the tracker once something is in flight; the tracker is built below, with
  // the path its fillers take.
  const onInFlight = (): void => tracker.wake();
  const lane = createBroadcastLane({
    db,
    rpc,
    logger,
    store,
    onInFlight,
    context: "outbox broadcast",
    maxWaiting: deps.maxWaiting,
  });
  // A sender's view of the chain (its mined nonce and balance), read in one JSON-RPC batch with
  // the others asked for meanwhile; undefined when the chain did not say.
  const senderView = createBatcher<string, SenderView | undefined>(
    (addresses) => readSenderViews(rpc, addresses),
    { maxBatch: SENDER_VIEWS_PER_READ, maxInFlight: SENDER_VIEW_READS_IN_FLIGHT },
  );
  const submit = createSubmit({
    db,
    rpc,
    logger,
    signer: deps.signer,
    fees: deps.fees,
    lane,
    leaseMs,
    senderView,
    observer: deps.observer,
  });
  const tracker = createTxTracker(
    {
      db,
      rpc,
      logger,
      store,
      hooks: domains,
      gaps: { submit, kind: fillerKind(domains.fillerRows), serviceKeys: deps.serviceKeys },
    },
    { leaseMs, ...deps.tracker },
  );
  const stopping = new AbortController();
  return {
    submit,
    releaseReceiptWaits: () => stopping.abort(),
    stopping: stopping.signal,
    async receipt(sent, options) {
      const read = await (await sent.broadcast).receipt;
      if (read) return read;
      const receipt = await waitForReceipt(rpc, sent.txHash as Hex, options.timeoutMs, stopping.signal);
      if (!receipt) return undefined;
      const recording = { logger, onInFlight, context: "receipt wait" };
      await bookkeep(recording, "recording the receipt", () =>
        store.recordMined(db, [{ txId: sent.txId, ...receipt }]),
      );
      return receipt;
    },
    idle: () => lane.idle(),
    tracker,
  };
}
