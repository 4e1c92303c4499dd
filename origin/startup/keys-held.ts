import { err, ok } from "../../shared/result.ts";
import type { StartupCheck } from "../capability.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { missingBatchesText } from "../signer/batch-holding.ts";

/**
 * An enclave that answers but lacks the assigned keys is not the one these wallets were made in,
 * or a recovery left a batch out: serving would answer those wallets' signing requests "no such
 * key" and the sweep would disable their identities, so the origin refuses to start, naming each
 * batch missing (batchesHeld asks one key of every batch; keysHeld, the oldest and the newest
 * identity's, where the infrastructure offers no more). One that does not answer is let through
 * (/healthz reports it), as for the policy. Without an enclave endpoint there is nothing to ask.
 */
export async function checkKeysHeld(
  infra: Pick<Infrastructure, "keysHeld" | "batchesHeld" | "logger">,
): Promise<StartupCheck<void>> {
  if (infra.batchesHeld) {
    const held = await infra.batchesHeld();
    if (held.missing.length > 0) {
      // Every wallet of every missing batch, where the refusal names the first few.
      for (const batch of held.missing) {
        infra.logger.error(
          { batch_id: batch.batchId, backup_file: batch.backupFile, wallets: batch.wallets },
          "the enclave does not hold this key batch",
        );
      }
      return err([missingBatchesText(held)]);
    }
    if (held.error)
      infra.logger.warn({ code: held.error }, "could not ask the enclave for the assigned keys at start");
    return ok(undefined);
  }
  if (!infra.keysHeld) return ok(undefined);
  const held = await infra.keysHeld();
  if (held.missing > 0)
    return err([`${held.instruction} (${held.missing} of ${held.checked} keys checked are missing)`]);
  if (!held.ok)
    infra.logger.warn({ code: held.error }, "could not ask the enclave for the assigned keys at start");
  return ok(undefined);
}
