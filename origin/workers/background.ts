import type { AppDeps } from "../deps.ts";
import { sweepIdentities } from "../identity/sweep.ts";
import { refillOnce } from "../keypool/refill.ts";
import { sweepStuckBatches } from "../keypool/sweeper.ts";
import { createCapabilityMinter } from "../signer/capability-minter.ts";
import { startLoop, type Worker } from "./loop.ts";

const REFILL_PERIOD_MS = 10_000;
const MAX_REFILL_BACKOFF_MS = 5 * 60_000;

/**
 * The origin's background workers (DESIGN §1): key-pool refill, stuck-batch sweeper and identity
 * sweep. Started only when the gateway switch is on (SPEC "Configuration switches").
 */
export function startBackgroundWorkers(deps: AppDeps): Worker[] {
  const { config, logger, database, signer, clock } = deps;
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
          { db, signer, authorize, backupDir: config.keyPool.backupDir, logger },
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
    startLoop("identity-sweep", config.identitySweep.periodSeconds * 1000, logger, async () => {
      const report = await sweepIdentities(
        { db, signer, logger },
        { envId: config.envId, windowSeconds: config.identitySweep.windowSeconds, now: clock.now() },
      );
      if (report.checked > 0) logger.info(report, "identity sweep");
    }),
  );
  return workers;
}
