import type { Db } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import { failBatch, findStuckBatches } from "./batch-repository.ts";

export type SweepBatchesParams = { stuckAfterSeconds: number };

/**
 * Batches stuck in an intermediate backup state fail, and their keys are quarantined
 * (docs/operations.md#the-key-pool-refills-on-demand), so inputs left by a crash are reconciled and
 * never handed out.
 */
export async function sweepStuckBatches(
  db: Db,
  logger: Logger,
  params: SweepBatchesParams,
): Promise<string[]> {
  const failed: string[] = [];
  for (const batch of await findStuckBatches(db, params.stuckAfterSeconds)) {
    if (await failBatch(db, batch.batchId, `stuck in ${batch.status}`)) {
      failed.push(batch.batchId);
      logger.warn({ batch_id: batch.batchId, status: batch.status }, "stuck key batch failed");
    }
  }
  return failed;
}
