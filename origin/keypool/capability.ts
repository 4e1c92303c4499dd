import { type Capability, capability } from "../capability.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { createCapabilityMinter } from "../signer/capability-minter.ts";
import { startLoop, type Worker } from "../workers/loop.ts";
import { createKeyDemand, type KeyDemand, type KeyDemandRefill } from "./demand.ts";
import { type BatchOutcome, refillOnce } from "./refill.ts";
import { sweepStuckBatches } from "./sweeper.ts";

const REFILL_PERIOD_MS = 10_000;
const MAX_REFILL_BACKOFF_MS = 5 * 60_000;

export type KeyPoolModule = {
  capability: Capability;
  /** Registration's link to this node's refill: wake it, wait for its next batch. */
  demand: KeyDemand;
};

/**
 * The key pool's background workers: the refill, when the origin can mint the
 * enclave's admin capability, and the stuck-batch sweeper. The refill runs every period and
 * whenever registration wakes it (keypool/demand.ts).
 */
export function createKeyPoolModule(infra: Infrastructure): KeyPoolModule {
  const { demand, refill } = createKeyDemand();
  return {
    capability: capability("keypool", { workers: () => startKeyPoolWorkers(infra, refill) }),
    demand,
  };
}

function startKeyPoolWorkers(infra: Infrastructure, demand: KeyDemandRefill): Worker[] {
  const { config, logger, database, signer, backupStore } = infra;
  const db = database.db;
  const workers: Worker[] = [];

  if (config.signer.endpoint && config.signer.adminAuthorityKeyFile) {
    const authorize = createCapabilityMinter({
      authority: { keyPath: config.signer.adminAuthorityKeyFile },
      envId: config.envId,
      client: signer,
    });
    // While batches keep failing (enclave down, disk full), wait longer between attempts, so an
    // outage leaves a handful of failed batch rows rather than one every period.
    let failuresInRow = 0;
    let nextAttempt = 0;
    const { target, batchSize } = config.keyPool;
    const refill = startLoop("key-pool-refill", REFILL_PERIOD_MS, logger, async () => {
      if (Date.now() < nextAttempt) return;
      let outcomes: BatchOutcome[];
      try {
        outcomes = await refillOnce(
          { db, signer, authorize, backupDir: config.keyPool.backupDir, backups: backupStore, logger },
          {
            // docs/operations.md#the-key-pool-refills-on-demand: at least one batch above the
            // registration reserve, so public issuance is not left at the reserve by a target
            // set below it; whole batches, since a woken round may be short of a single key.
            target: Math.max(target, demand.keyReserve() + batchSize),
            batchSize,
            wholeBatches: true,
            onBatch: (outcome) => {
              if (outcome.ok) demand.madeBatch();
            },
          },
        );
      } catch (error) {
        // The database failed under the round (logged by the loop): nobody should wait on it.
        demand.roundEnded(true);
        throw error;
      }
      const made = outcomes.filter((outcome) => outcome.ok).length;
      if (made > 0) logger.info({ batches: made }, "key pool refilled");
      const failed = outcomes.some((outcome) => !outcome.ok);
      failuresInRow = failed ? failuresInRow + 1 : 0;
      nextAttempt =
        failuresInRow === 0
          ? 0
          : Date.now() + Math.min(MAX_REFILL_BACKOFF_MS, REFILL_PERIOD_MS * 2 ** failuresInRow);
      demand.backOff(nextAttempt);
      demand.roundEnded(failed);
    });
    demand.attach(refill);
    workers.push({
      name: refill.name,
      ticks: refill.ticks,
      async stop() {
        demand.attach(undefined);
        await refill.stop();
      },
    });
  } else {
    logger.warn(
      "key-pool refill is off: AGENT_SIGNER_SVC_HSM_ENDPOINT or AGENT_ADMIN_AUTHORITY_KEY_FILE is unset",
    );
  }

  workers.push(
    startLoop(
      "key-batch-sweeper",
      Math.min(60_000, config.keyPool.stuckAfterSeconds * 1000),
      logger,
      async () => {
        await sweepStuckBatches(db, logger, { stuckAfterSeconds: config.keyPool.stuckAfterSeconds });
      },
    ),
  );
  return workers;
}
