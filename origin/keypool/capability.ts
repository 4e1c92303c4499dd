import { type Capability, capability } from "../capability.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { createCapabilityMinter } from "../signer/capability-minter.ts";
import { startLoop, type Worker } from "../workers/loop.ts";
import { refillOnce } from "./refill.ts";
import { sweepStuckBatches } from "./sweeper.ts";

const REFILL_PERIOD_MS = 10_000;
const MAX_REFILL_BACKOFF_MS = 5 * 60_000;

/**
 * The key pool's background workers: the refill, when the origin can mint the
 * enclave's admin capability, and the stuck-batch sweeper.
 */
export function createKeyPoolModule(infra: Infrastructure): Capability {
  return capability("keypool", { workers: () => startKeyPoolWorkers(infra) });
}

function startKeyPoolWorkers(infra: Infrastructure): Worker[] {
  const { config, logger, database, signer, clock, backupStore } = infra;
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
    workers.push(
      startLoop("key-pool-refill", REFILL_PERIOD_MS, logger, async () => {
        if (Date.now() < nextAttempt) return;
        const outcomes = await refillOnce(
          { db, signer, authorize, backupDir: config.keyPool.backupDir, backups: backupStore, logger },
          { target: config.keyPool.target, batchSize: config.keyPool.batchSize },
        );
        const made = outcomes.filter((outcome) => outcome.ok).length;
        if (made > 0) logger.info({ batches: made }, "key pool refilled");
        failuresInRow = outcomes.some((outcome) => !outcome.ok) ? failuresInRow + 1 : 0;
        nextAttempt =
          failuresInRow === 0
            ? 0
            : Date.now() + Math.min(MAX_REFILL_BACKOFF_MS, REFILL_PERIOD_MS * 2 ** failuresInRow);
      }),
    );
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
        await sweepStuckBatches(db, logger, {
          stuckAfterSeconds: config.keyPool.stuckAfterSeconds,
          now: clock.now(),
        });
      },
    ),
  );
  return workers;
}
