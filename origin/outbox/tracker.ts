/**
 * Follows the service's own transactions to the end the chain decides (decide.ts): `submitted` ones
 * to their receipt (`confirmed`, or `reverted` for status 0) or to another transaction mined at
 * their nonce (`failed`); `signed` ones whose broadcast never happened (a crash, an unreachable
 * chain) to the chain with the same bytes, and in-flight ones to the chain again (a node may have
 * dropped or never taken them); stuck ones replaced by a filler (fillers.ts); and the domains'
 * sweeps run (tracker-hooks.ts: money ends the agent actions nobody finished). Broadcasts are
 * leased, so several origins on one database share the work and never send one transaction at the
 * same time.
 */

import { sql } from "drizzle-orm";
import type { Hex } from "../../shared/hex.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { runByKey } from "../db/by-key.ts";
import type { Db } from "../db/client.ts";
import { preparedStatement, runPrepared } from "../db/prepared.ts";
import type { Logger } from "../logger.ts";
import { startLoop, type WakeableWorker, type Worker, type WorkerTicks } from "../workers/loop.ts";
import { decidePassed, type Unmined } from "./decide.ts";
import { type FillerDeps, replaceStuck } from "./fillers.ts";
import type { MinedTransaction } from "./intent.ts";
import { readReceiptAnswers } from "./receipts.ts";
import { broadcastStored } from "./sender.ts";
import { broadcastLeaseMs, type OutboxStore } from "./store.ts";
import { runTrackerSweeps, type TrackerHooks } from "./tracker-hooks.ts";

export type TxTrackerOptions = {
  /** How long a broadcast lease lasts (outbox/store.ts broadcastLeaseMs). */
  leaseMs?: number;
  /** Between ticks while nothing wakes the tracker. */
  periodMs?: number;
  /**
   * Between looks for transactions to send again and actions to abandon (a tick in between only
   * reads receipts): those wait seconds anyway, and each look reads the in-flight index. Default:
   * a second, or signedGraceMs if shorter.
   */
  sweepMs?: number;
  /**
   * A `signed` transaction this long untouched was not broadcast after its signing: send it. A
   * `submitted` one whose last broadcast was not accepted is sent again after as long.
   */
  signedGraceMs?: number;
  /** A `submitted` transaction a node accepted, this long without a receipt, is sent again (a node may drop it). */
  resendAfterMs?: number;
  /**
   * A sender's first transaction in flight, signed this long ago and still unmined, is replaced by
   * a filler (fillers.ts); one a node refused at its last broadcast is replaced at once. One waiting
   * behind an earlier transaction of its sender is never replaced. Default two minutes.
   */
  replaceAfterMs?: number;
  /**
   * How long the chain's nonce must be seen past an unmined transaction, none of the service's
   * mined at that nonce, before it is called `failed` (decide.ts). Default ten minutes.
   */
  decideAfterMs?: number;
  /**
   * Handed to the domains' sweeps: money ends a `requested` action this long untouched (its
   * default: actions/abandon.ts ABANDON_REQUESTED_AFTER_MS).
   */
  abandonAfterMs?: number;
  /** Receipts asked for per tick. */
  batchSize?: number;
};

export type TxTracker = Worker & {
  /** The ticks that swept (sweepMs): looked for transactions to send again and actions to end. */
  sweeps(): WorkerTicks;
  /** Starts the loop; before it, wake() does nothing and tick() runs one pass on demand. */
  start(): void;
  /** Look for receipts soon (a transaction was just broadcast). */
  wake(): void;
  /** One full tick now; resolves when it is done (tests, shutdown). */
  tick(): Promise<TickReport>;
};

export type TickReport = {
  confirmed: number;
  reverted: number;
  rebroadcast: number;
  abandoned: number;
  /** Fillers a node accepted in place of stuck transactions. */
  filled: number;
  /** Transactions ended `failed` because a transaction the service did not sign took their nonce. */
  failed: number;
};

/** What replacing stuck transactions needs beyond the tracker's own deps (absent: none are replaced). */
export type TrackerGapDeps = Pick<FillerDeps, "submit" | "kind" | "serviceKeys">;

// The tick's statements run several times a second per origin, so each is planned once (db/prepared.ts).
/**
 * The submitted transactions after a place in (updated_at, tx_id) order (the start: '-infinity' and
 * the nil uuid): the tracker reads them a batch at a time from where its last read stopped, so
 * transactions that stay unmined at the front (a stuck one waiting for its filler) do not hide the
 * ones behind them from every tick.
 */
export const submittedStatement = preparedStatement<"limit" | "afterAt" | "afterId">(
  "tracker_submitted",
  sql`select tx_id, tx_hash, sender, nonce::text, (created_at < now() - interval '2 seconds') as settled_in,
        updated_at::text as updated_at
      from outgoing_transactions where status = 'submitted'
        and (updated_at, tx_id) > (${sql.placeholder("afterAt")}::timestamptz, ${sql.placeholder("afterId")}::uuid)
      order by updated_at, tx_id limit ${sql.placeholder("limit")}::int`,
).returns({
  tx_id: "uuid",
  tx_hash: "text",
  sender: "text",
  nonce: "text",
  settled_in: "bool",
  updated_at: "text",
});

/** The most transactions a tracker remembers as unread (createTxTracker's `unread`). */
const MAX_UNREAD = 10_000;

/** Where the tracker's reads of submitted transactions start: before every one of them. */
const SUBMITTED_START = { afterAt: "-infinity", afterId: "00000000-0000-0000-0000-000000000000" };

/**
 * What is due to be sent again: never broadcast since its signing, or in flight without a receipt.
 * An unknown answer (the node may not have it) is followed by the same bytes again soon; an accepted
 * one after a longer wait (a node may drop it); a refused one only as slowly, since the same bytes
 * would meet the same refusal and the filler beside it (fillers.ts) is what ends it. A payment with
 * a filler beside it is left to the filler: the tracker stops pushing what it is replacing.
 */
export const dueStatement = preparedStatement<"signedGrace" | "resendAfter">(
  "tracker_due",
  sql`select tx_id from outgoing_transactions t
      where ((t.status = 'signed'
              and t.updated_at < now() - make_interval(secs => ${sql.placeholder("signedGrace")}::double precision))
          or (t.status = 'submitted' and t.updated_at < now() - make_interval(secs =>
              case when t.broadcast_outcome in ('accepted', 'refused') then ${sql.placeholder("resendAfter")}::double precision
                   else ${sql.placeholder("signedGrace")}::double precision end)))
        and (t.broadcast_lease_until is null or t.broadcast_lease_until < now())
        and (t.purpose = 'filler' or not exists (select 1 from outgoing_transactions f
          where f.sender = t.sender and f.nonce = t.nonce and f.purpose = 'filler' and f.status <> 'failed'))
      order by t.updated_at limit 100`,
).returns({ tx_id: "uuid" });

/**
 * What is due to be sent again (dueStatement), under the outbox's planner settings (runByKey). The
 * tracker reads it every tick through the plan its connection keeps; made on a small analyzed
 * table without those settings, that plan read the table whole, and for each row the table whole
 * again for a filler beside it: quadratic in the transactions the node had made, until the table
 * was analyzed again (docs/performance.md, "How the cost grows").
 */
export function readDue(db: Db, after: { signedGraceMs: number; resendAfterMs: number }) {
  return runByKey(db, dueStatement, {
    signedGrace: after.signedGraceMs / 1000,
    resendAfter: after.resendAfterMs / 1000,
  });
}

export type TxTrackerDeps = {
  db: Db;
  rpc: JsonRpcUpstream;
  logger: Logger;
  store: OutboxStore;
  hooks: TrackerHooks;
  /** Absent: stuck transactions are not replaced. */
  gaps?: TrackerGapDeps;
};

export function createTxTracker(deps: TxTrackerDeps, options: TxTrackerOptions = {}): TxTracker {
  const periodMs = options.periodMs ?? 250;
  const signedGraceMs = options.signedGraceMs ?? 5_000;
  const resendAfterMs = options.resendAfterMs ?? 30_000;
  const batchSize = options.batchSize ?? 500;
  const leaseMs = options.leaseMs ?? broadcastLeaseMs(5_000);
  const replaceAfterMs = options.replaceAfterMs ?? 120_000;
  const decideAfterMs = options.decideAfterMs ?? 600_000;
  const sweepMs = options.sweepMs ?? Math.min(1_000, signedGraceMs);
  let lastSweep = Number.NEGATIVE_INFINITY;
  const sweeps: WorkerTicks = { ok: 0, failed: 0 };
  const refusedFillers = new Map<string, number>();
  /** Where the next read of submitted transactions starts (resolveSubmitted). */
  let submittedAfter = SUBMITTED_START;
  /**
   * The transactions whose receipt reads failed since this tracker last had an answer for them: the
   * next "no receipt" starts their wait again (decide.ts). Bounded: past MAX_UNREAD it is emptied
   * (a transaction another origin ended stays until then).
   */
  const unread = new Set<string>();

  let loop: WakeableWorker | undefined;
  let stopped = false;

  const tick = async (sweep: boolean): Promise<TickReport> => {
    const report: TickReport = {
      confirmed: 0,
      reverted: 0,
      rebroadcast: 0,
      abandoned: 0,
      filled: 0,
      failed: 0,
    };
    const unmined = await resolveSubmitted(report);
    if (!sweep) return report;
    lastSweep = Date.now();
    try {
      await runSweep(report, unmined);
    } catch (error) {
      sweeps.failed++;
      throw error;
    }
    sweeps.ok++;
    return report;
  };

  /** What a tick does past reading receipts, once a sweep's period has passed (sweepMs). */
  const runSweep = async (report: TickReport, unmined: Unmined[]): Promise<void> => {
    report.failed = await decidePassed(deps, unmined, decideAfterMs, (txId) => unread.delete(txId));
    await rebroadcast(report);
    if (deps.gaps) {
      report.filled = await replaceStuck({
        ...deps,
        ...deps.gaps,
        replaceAfterMs,
        refused: refusedFillers,
      });
    }
    report.abandoned = await runTrackerSweeps(deps.hooks, deps.db, {
      abandonAfterMs: options.abandonAfterMs,
    });
  };

  // No lock is held while the chain answers: several origins may read the same receipts, and
  // recordMined moves only what is still in flight, so the work is idempotent. Resolves with the
  // transactions left without a receipt that are more than a moment old (decide.ts looks at them).
  // A tick reads from where the last one stopped (in updated_at order), and from the start again
  // once it reaches the end: every submitted transaction is read within a few ticks, however many
  // stay unmined before it.
  const resolveSubmitted = async (report: TickReport): Promise<Unmined[]> => {
    const unmined: Unmined[] = [];
    for (;;) {
      const from = submittedAfter;
      const rows = await runPrepared(deps.db, submittedStatement, { limit: batchSize, ...from });
      if (rows.length < batchSize) submittedAfter = SUBMITTED_START;
      else {
        const last = rows.at(-1)!;
        submittedAfter = { afterAt: last.updated_at, afterId: last.tx_id };
      }
      if (rows.length === 0) {
        // At the end: once round to the start, unless this read was from the start.
        if (from === SUBMITTED_START) return unmined;
        continue;
      }
      // None when the chain is down: nothing is recorded, and the next tick tries again. Only a
      // transaction the chain said it has no receipt for is unmined: a read that failed says
      // nothing of it, and decide.ts must never end a mined one for a receipt it could not read.
      const receipts = await readReceiptAnswers(
        deps.rpc,
        rows.map((row) => row.tx_hash as Hex),
      );
      const mined: MinedTransaction[] = [];
      for (const row of rows) {
        const outcome = receipts.get(row.tx_hash);
        if (outcome === undefined) {
          if (unread.size >= MAX_UNREAD) unread.clear();
          unread.add(row.tx_id);
          continue;
        }
        // Kept until decide.ts has looked at it: a tick that does not sweep reads receipts only.
        const restart = unread.has(row.tx_id);
        if (outcome) unread.delete(row.tx_id);
        if (outcome) mined.push({ txId: row.tx_id, ...outcome });
        else if (row.settled_in)
          unmined.push({ txId: row.tx_id, sender: row.sender, nonce: BigInt(row.nonce), restart });
      }
      await deps.store.recordMined(deps.db, mined);
      for (const item of mined) {
        if (item.status === "confirmed") report.confirmed++;
        else report.reverted++;
      }
      // Another full batch may be waiting only if this one was full and all of it was mined.
      if (rows.length < batchSize || mined.length < rows.length) return unmined;
      // All of it was mined and left `submitted`: the next read starts where this one did.
      submittedAfter = from;
    }
  };

  const rebroadcast = async (report: TickReport): Promise<void> => {
    const due = await readDue(deps.db, { signedGraceMs, resendAfterMs });
    for (const row of due) {
      const outcome = await broadcastStored(deps, row.tx_id, { leaseMs });
      if (!outcome) continue;
      report.rebroadcast++;
      deps.logger.info({ tx_id: row.tx_id, outcome: outcome.kind }, "transaction sent again");
    }
  };

  return {
    name: "tx-tracker",
    ticks: () => loop?.ticks() ?? { ok: 0, failed: 0 },
    sweeps: () => ({ ...sweeps }),
    start: () => {
      if (loop || stopped) return;
      // The worker loop logs a tick that failed and goes on (workers/loop.ts).
      loop = startLoop("tx-tracker", periodMs, deps.logger, async () => {
        await tick(Date.now() - lastSweep >= sweepMs);
      });
    },
    wake: () => loop?.wake(),
    tick: () => tick(true),
    async stop() {
      stopped = true;
      await loop?.stop();
    },
  };
}
