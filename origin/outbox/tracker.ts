/**
 * Follows the service's own transactions to the end: `submitted` ones to their
 * receipt (`confirmed`, or `reverted` for status 0), `signed` ones whose broadcast never happened
 * (a crash, an unreachable chain) back to the chain with the same bytes, the holes a refusal left
 * in a sender's nonces filled (gaps.ts), and the domains' sweeps run (tracker-hooks.ts: money
 * ends the agent actions nobody finished). Every row is taken with SKIP LOCKED, so several origins
 * on one database share the work and never broadcast one transaction at the same time.
 */

import { sql } from "drizzle-orm";
import { errorMessage } from "../../shared/error-message.ts";
import type { Hex } from "../../shared/hex.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { Db } from "../db/client.ts";
import { preparedStatement, runPrepared } from "../db/prepared.ts";
import type { Logger } from "../logger.ts";
import type { Worker } from "../workers/loop.ts";
import { fillNonceGaps, type GapFillerDeps } from "./gaps.ts";
import type { MinedTransaction, TxStatus } from "./intent.ts";
import { readReceipts } from "./receipts.ts";
import { broadcastStored } from "./sender.ts";
import { broadcastLeaseMs, recordMined } from "./store.ts";
import { runTrackerSweeps } from "./tracker-hooks.ts";

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
  /** A `signed` transaction this long untouched was not broadcast after its signing: send it. */
  signedGraceMs?: number;
  /** A `submitted` transaction this long without a receipt is sent again (a node may drop it). */
  resendAfterMs?: number;
  /**
   * Handed to the domains' sweeps: money ends a `requested` action this long untouched (its
   * default: actions/abandon.ts ABANDON_REQUESTED_AFTER_MS).
   */
  abandonAfterMs?: number;
  /** Receipts asked for per tick. */
  batchSize?: number;
};

export type TxTracker = Worker & {
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
  /** Fillers the chain accepted into nonce gaps. */
  filled: number;
};

/** What filling nonce gaps needs beyond the tracker's own deps (absent: gaps are not filled). */
export type TrackerGapDeps = Pick<GapFillerDeps, "signer" | "fees" | "serviceKeys">;

// The tick's statements run several times a second per origin, so each is planned once (db/prepared.ts).
const submittedStatement = preparedStatement<"limit">(
  "tracker_submitted",
  sql`select tx_id, tx_hash from outgoing_transactions where status = 'submitted'
      order by updated_at limit ${sql.placeholder("limit")}::int`,
);

const dueStatement = preparedStatement<"signedGrace" | "resendAfter">(
  "tracker_due",
  sql`select tx_id, status from outgoing_transactions
      where ((status = 'signed'
              and updated_at < now() - make_interval(secs => ${sql.placeholder("signedGrace")}::double precision))
          or (status = 'submitted'
              and updated_at < now() - make_interval(secs => ${sql.placeholder("resendAfter")}::double precision)))
        and (broadcast_lease_until is null or broadcast_lease_until < now())
      order by updated_at limit 100`,
);

export function createTxTracker(
  deps: { db: Db; rpc: JsonRpcUpstream; logger: Logger; gaps?: TrackerGapDeps },
  options: TxTrackerOptions = {},
): TxTracker {
  const periodMs = options.periodMs ?? 250;
  const signedGraceMs = options.signedGraceMs ?? 5_000;
  const resendAfterMs = options.resendAfterMs ?? 30_000;
  const batchSize = options.batchSize ?? 500;
  const leaseMs = options.leaseMs ?? broadcastLeaseMs(5_000);
  const sweepMs = options.sweepMs ?? Math.min(1_000, signedGraceMs);
  let lastSweep = Number.NEGATIVE_INFINITY;

  let started = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<TickReport> | undefined;
  let again = false;

  const tick = async (sweep: boolean): Promise<TickReport> => {
    const report: TickReport = { confirmed: 0, reverted: 0, rebroadcast: 0, abandoned: 0, filled: 0 };
    await resolveSubmitted(report);
    if (!sweep) return report;
    lastSweep = Date.now();
    await rebroadcast(report);
    if (deps.gaps) {
      report.filled = await fillNonceGaps({ ...deps, ...deps.gaps, leaseMs });
    }
    report.abandoned = await runTrackerSweeps(deps.db, { abandonAfterMs: options.abandonAfterMs });
    return report;
  };

  // No lock is held while the chain answers: several origins may read the same receipts, and
  // recordMined moves only what is still `submitted`, so the work is idempotent.
  const resolveSubmitted = async (report: TickReport): Promise<void> => {
    for (;;) {
      const rows = await runPrepared<{ tx_id: string; tx_hash: string }, "limit">(
        deps.db,
        submittedStatement,
        {
          limit: batchSize,
        },
      );
      if (rows.length === 0) return;
      // None when the chain is down: nothing is recorded, and the next tick tries again.
      const receipts = await readReceipts(
        deps.rpc,
        rows.map((row) => row.tx_hash as Hex),
      );
      const mined: MinedTransaction[] = rows.flatMap((row) => {
        const outcome = receipts.get(row.tx_hash);
        return outcome ? [{ txId: row.tx_id, ...outcome }] : [];
      });
      await recordMined(deps.db, mined);
      for (const item of mined) {
        if (item.status === "confirmed") report.confirmed++;
        else report.reverted++;
      }
      // Another full batch may be waiting only if this one was full and all of it was mined.
      if (rows.length < batchSize || mined.length < rows.length) return;
    }
  };

  const rebroadcast = async (report: TickReport): Promise<void> => {
    const due = await runPrepared<{ tx_id: string; status: TxStatus }, "signedGrace" | "resendAfter">(
      deps.db,
      dueStatement,
      { signedGrace: signedGraceMs / 1000, resendAfter: resendAfterMs / 1000 },
    );
    for (const row of due) {
      const outcome = await broadcastStored(deps.db, deps.rpc, row.tx_id, {
        leaseMs,
        resend: row.status === "submitted",
      });
      if (!outcome) continue;
      report.rebroadcast++;
      deps.logger.info({ tx_id: row.tx_id, outcome: outcome.kind }, "transaction sent again");
    }
  };

  const run = (): void => {
    if (stopped || !started) return;
    if (running) {
      again = true;
      return;
    }
    clearTimeout(timer);
    running = tick(Date.now() - lastSweep >= sweepMs)
      .catch((error: unknown) => {
        deps.logger.error(
          { worker: "tx-tracker", err: { message: errorMessage(error) } },
          "worker tick failed",
        );
        return { confirmed: 0, reverted: 0, rebroadcast: 0, abandoned: 0, filled: 0 };
      })
      .finally(() => {
        running = undefined;
        if (stopped) return;
        if (again) {
          again = false;
          setImmediate(run);
        } else timer = setTimeout(run, periodMs);
      });
  };
  return {
    name: "tx-tracker",
    start: () => {
      if (started || stopped) return;
      started = true;
      run();
    },
    wake: () => {
      if (!started || stopped) return;
      if (!running) {
        clearTimeout(timer);
        setImmediate(run);
      } else again = true;
    },
    tick: () => tick(true),
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
