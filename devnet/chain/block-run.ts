/**
 * One block-building run, under the chain lock: it takes every transaction waiting in the pool
 * and mines them, in arrival order, into as few blocks as the gas limit (and maxTxsPerBlock)
 * allow. What does not fit goes into the following blocks of the same run, so a call (or a read
 * at "pending") queued on the lock behind the run sees every transaction sent before it.
 * Transactions that arrive during the run wait for the next one. Between transactions the run
 * lets the event loop serve what arrived meanwhile (reads of the head, new transactions joining
 * the pool): executing one takes about a millisecond, and a block of a hundred would otherwise
 * hold every request that long.
 */
import type { Address } from "@ethereumjs/util";
import { err, ok } from "../../shared/result.ts";
import type { DevnetLogger } from "../logger.ts";
import type { BlockBuilder } from "./block-builder.ts";
import type { FutureQueue, QueuedTx } from "./future-queue.ts";
import type { Mined } from "./miner.ts";
import type { PendingPool, Submission } from "./pending-pool.ts";
import { feeCap, type TxRejection, upfrontCost } from "./tx-admission.ts";
import type { DevnetVm } from "./vm.ts";

export type BlockRunContext = {
  dvm: DevnetVm;
  pool: PendingPool;
  queue: FutureQueue;
  logger: DevnetLogger;
  maxTxsPerBlock: number;
  /** A builder for the block on top of the current head. */
  nextBlock(): BlockBuilder;
  /** Stores a sealed block and makes it the head. */
  append(mined: Mined): void;
};

type Outcome = "included" | "queued" | "full" | TxRejection;

export async function mineWaiting(ctx: BlockRunContext): Promise<void> {
  // Queued (nonce ahead) during this run: answered when it ends, unless the run mines them.
  const queuedNow: QueuedTx[] = [];
  try {
    let batch = ctx.pool.takeAll();
    while (batch.length > 0) batch = await mineBlock(ctx, batch, queuedNow);
  } catch (error) {
    // A bug, not a refused transaction: answer the callers rather than leave them hanging.
    ctx.logger.error(
      { error: error instanceof Error ? error.stack : String(error) },
      "block building failed",
    );
    ctx.pool.failInFlight(error);
  } finally {
    for (const queued of queuedNow) {
      queued.caller?.resolve(ok(queued.hash));
      queued.caller = undefined;
    }
  }
}

/** Builds and appends one block from `batch`; returns what did not fit, in order. */
async function mineBlock(
  ctx: BlockRunContext,
  batch: readonly Submission[],
  queuedNow: QueuedTx[],
): Promise<Submission[]> {
  const builder = ctx.nextBlock();
  const included: Submission[] = [];
  const leftover: Submission[] = [];
  // A sender with a transaction carried over has its later ones carried over too, in order.
  const carried = new Set<string>();
  const place = async (entry: Submission): Promise<void> => {
    // In arrival order: while this one's signature is recovered, later ones' may be too.
    const admitted = await entry.admitted;
    if (!admitted.ok) return ctx.pool.settle(entry, err(admitted.error));
    const sender = admitted.value;
    if (carried.has(sender.toString())) return void leftover.push(entry);
    const outcome = await include(ctx, builder, entry, sender, queuedNow);
    if (outcome === "full") {
      leftover.push(entry);
      carried.add(sender.toString());
      return;
    }
    // Its caller went with it into the future queue.
    if (outcome === "queued") return ctx.pool.settle(entry, undefined);
    if (outcome !== "included") {
      if (entry.caller === undefined) {
        ctx.logger.warn({ tx: entry.hash, reason: outcome.kind }, "dropped a queued transaction");
      }
      return ctx.pool.settle(entry, err(outcome));
    }
    included.push(entry);
    // The sender's queued transaction that this one made executable follows it.
    const next = ctx.queue.take(sender, entry.tx.nonce + 1n);
    if (next === undefined) return;
    const caller = next.caller;
    next.caller = undefined;
    await place(ctx.pool.adopt({ ...next, caller }));
  };
  try {
    for (const entry of batch) {
      await new Promise((resolve) => setImmediate(resolve));
      await place(entry);
    }
    if (builder.count > 0) ctx.append(await builder.seal());
  } finally {
    // Unsealed: every transaction refused, or the run failed (a bug: mineWaiting answers for it).
    await builder.abandon();
  }
  // Answered only now: a caller's receipt is in the store when its call returns.
  ctx.pool.settleMined(included);
  return leftover;
}

/** Executes `entry` as the builder's next transaction, unless it must wait or be refused. */
async function include(
  ctx: BlockRunContext,
  builder: BlockBuilder,
  entry: Submission,
  sender: Address,
  queuedNow: QueuedTx[],
): Promise<Outcome> {
  const { tx, hash } = entry;
  const account = await ctx.dvm.state.getAccount(sender);
  const next = account?.nonce ?? 0n;
  if (tx.nonce < next) return { kind: "nonce_too_low", next, got: tx.nonce };
  const balance = account?.balance ?? 0n;
  const cost = upfrontCost(tx);
  if (tx.nonce > next) {
    // geth's pool checks the balance of every transaction it takes, queued ones too: one it could
    // not pay would otherwise be answered with a hash, wait, and be dropped once its gap filled.
    if (balance < cost) return { kind: "insufficient_funds", balance, cost };
    const queued: QueuedTx = { hash, tx, sender, caller: entry.caller };
    const added = ctx.queue.add(queued);
    if (!added.ok) {
      return added.error === "replacement_underpriced"
        ? { kind: "replacement_underpriced" }
        : { kind: "queue_full" };
    }
    queuedNow.push(queued);
    return "queued";
  }
  if (builder.count >= ctx.maxTxsPerBlock || tx.gasLimit > builder.gasRemaining) return "full";
  const cap = feeCap(tx);
  if (cap < builder.baseFee)
    return { kind: "fee_cap_below_base_fee", sender, feeCap: cap, baseFee: builder.baseFee };
  if (balance < cost) return { kind: "insufficient_funds", balance, cost };
  const ran = await builder.add(tx, sender);
  if (!ran.ok) return { kind: "execution_refused", detail: ran.error };
  return "included";
}
