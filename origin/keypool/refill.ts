import { err, ok, type Result } from "../../shared/result.ts";
import { type BackupStore, fileBackupStore } from "../backup-store.ts";
import type { Db } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import type { CapabilityProvider, SignerClient } from "../signer/types.ts";
import {
  advanceBatch,
  createBatch,
  createBatchWhileShort,
  failBatch,
  type GeneratedKey,
  poolStock,
  recordGeneratedKeys,
  releaseBatch,
} from "./batch-repository.ts";

export type RefillDeps = {
  db: Db;
  /** A batch is generated, exported and verified: the refill asks the enclave nothing else. */
  signer: Pick<SignerClient, "generateKeys" | "exportBackup" | "verifyBackup">;
  /** Mints the admin capabilities generate_keys and export_backup need. */
  authorize: CapabilityProvider;
  backupDir: string;
  /** Where the backups under backupDir are written and read back; the files on this host by default. */
  backups?: BackupStore;
  logger: Logger;
};

/** Why a batch did not become ready. */
export type BatchFailure =
  /** A step failed: the batch is `failed`, `reason` recorded as its failure, its keys quarantined. */
  | { code: "failed"; batchId: string; reason: string }
  /** The batch left the state this step expected (the sweeper failed it meanwhile): left as found. */
  | { code: "moved_on"; batchId: string };

/** A batch made ready (its keys available), or why not. */
export type BatchOutcome = Result<{ batchId: string; keys: number }, BatchFailure>;

/** The batch an outcome is about, made or failed. */
export function batchIdOf(outcome: BatchOutcome): string {
  return outcome.ok ? outcome.value.batchId : outcome.error.batchId;
}

/**
 * Makes one batch ready: requested → generated → backup_written → backup_verified → available.
 * Each transition is committed before the next step starts, so a crash anywhere leaves a batch in
 * a state the sweeper can fail; a step that fails fails the batch and quarantines its keys.
 */
export async function makeBatch(deps: RefillDeps, size: number): Promise<BatchOutcome> {
  return makeCreatedBatch(deps, await createBatch(deps.db, size), size);
}

/** makeBatch for a batch already created (`requested`). */
async function makeCreatedBatch(deps: RefillDeps, batchId: string, size: number): Promise<BatchOutcome> {
  const fail = failing(deps, batchId);

  const generated = await deps.signer.generateKeys(
    { namespace: "agent-transfer", count: size, batchId },
    deps.authorize,
  );
  if (!generated.ok) return fail(`generate_keys: ${generated.error.code}: ${generated.error.reason}`);
  const keys: GeneratedKey[] = generated.value.keys.map((key) => ({
    keyRef: key.keyRef,
    publicKey: key.publicKey,
    address: key.address,
  }));
  if (keys.length !== size) return fail("generate_keys: wrong number of keys");
  if (!(await recordGeneratedKeys(deps.db, batchId, keys))) return err({ code: "moved_on", batchId });

  const exported = await deps.signer.exportBackup(
    { batchId, keyRefs: keys.map((key) => key.keyRef) },
    deps.authorize,
  );
  if (!exported.ok) return fail(`export_backup: ${exported.error.code}: ${exported.error.reason}`);
  const written = await (deps.backups ?? fileBackupStore).write({
    dir: deps.backupDir,
    batchId,
    envelope: exported.value.envelope,
    expectedSha256: exported.value.sha256,
  });
  if (!written.ok) return fail(`backup_writer: ${written.error.code}: ${written.error.detail}`);
  const advanced = await advanceBatch(deps.db, batchId, "generated", "backup_written", {
    backupPath: written.value.path,
    backupSha256: written.value.sha256,
  });
  if (!advanced) return err({ code: "moved_on", batchId });

  return verifyAndRelease(deps, batchId, written.value.path, written.value.sha256, keys);
}

/**
 * backup_written → backup_verified → available: the enclave must decrypt the file's bytes (the
 * second copy, not the envelope in memory) and reproduce exactly the batch's public keys.
 */
export async function verifyAndRelease(
  deps: Pick<RefillDeps, "db" | "logger" | "backups"> & { signer: Pick<SignerClient, "verifyBackup"> },
  batchId: string,
  backupPath: string,
  backupSha256: string,
  keys: GeneratedKey[],
): Promise<BatchOutcome> {
  const fail = failing(deps, batchId);
  const file = await (deps.backups ?? fileBackupStore).read(backupPath, backupSha256);
  if (!file.ok) return fail(`backup_file: ${file.error}`);
  const verified = await deps.signer.verifyBackup({ envelope: file.value });
  if (!verified.ok) return fail(`verify_backup: ${verified.error.code}: ${verified.error.reason}`);
  const expected = new Set(keys.map((key) => `${key.keyRef}:${key.publicKey.toLowerCase()}`));
  const restored = new Set(verified.value.keys.map((key) => `${key.keyRef}:${key.publicKey.toLowerCase()}`));
  if (
    verified.value.batchId !== batchId ||
    expected.size !== restored.size ||
    [...expected].some((k) => !restored.has(k))
  ) {
    return fail("verify_backup: keys differ from the batch");
  }
  if (!(await advanceBatch(deps.db, batchId, "backup_written", "backup_verified"))) {
    return err({ code: "moved_on", batchId });
  }
  if (!(await releaseBatch(deps.db, batchId))) return err({ code: "moved_on", batchId });
  return ok({ batchId, keys: keys.length });
}

/**
 * Fails `batchId` for `reason` (its keys quarantined), says so in the log, and answers so. The
 * reason carries the enclave's or the disk's own words (a full disk, a missing folder, a stale
 * counter): the batch row and the log line are all an operator has to go on.
 */
function failing(
  deps: Pick<RefillDeps, "db" | "logger">,
  batchId: string,
): (reason: string) => Promise<BatchOutcome> {
  return async (reason) => {
    await failBatch(deps.db, batchId, reason);
    deps.logger.warn({ batch_id: batchId, reason }, "key batch failed");
    return err({ code: "failed", batchId, reason });
  };
}

export type RefillParams = {
  target: number;
  batchSize: number;
  /**
   * Every batch of `batchSize` keys, even when fewer would reach the target (the worker's rounds,
   * woken after each public issuance near the reserve, would otherwise make batches of one key).
   */
  wholeBatches?: boolean;
  /** Told of each batch as it ends, made or failed, while the round goes on. */
  onBatch?: (outcome: BatchOutcome) => void;
};

/**
 * A batch spends most of its time waiting: on a commit, on the backup's fsync, on the enclave's
 * generate, export or verify. With three at once one is generated while another is backed up and a
 * third verified (docs/performance.md, "Provisioning and the key pool"). Each batch still takes its
 * steps in order.
 */
export const REFILL_IN_FLIGHT = 3;

/**
 * Tops the free, verified stock up to `target`, counting keys already on their way. The outcomes
 * are in the order the batches started. After a failed batch no further batch starts (a failing
 * enclave or disk must not spin: the round stops and the worker tries again next tick); the batches
 * already running finish. A batch that throws (the database gone) stops the round the same way,
 * and the round throws once the others have finished, so none outlives it.
 */
export async function refillOnce(deps: RefillDeps, params: RefillParams): Promise<BatchOutcome[]> {
  const outcomes: BatchOutcome[] = [];
  for (;;) {
    const stock = await poolStock(deps.db);
    const deficit = params.target - stock.free - stock.pendingInBatches;
    if (deficit <= 0) return outcomes;
    const round = await makeBatches(deps, batchSizes(deficit, params), params);
    outcomes.push(...round);
    // None started: the batches of other origins, started since the stock was read, make it up.
    if (round.length === 0 || round.some((outcome) => !outcome.ok)) return outcomes;
  }
}

/** The batches that make up `deficit`: whole ones, then the remainder (a whole batch too with `wholeBatches`). */
function batchSizes(deficit: number, params: RefillParams): number[] {
  const sizes = Array.from({ length: Math.floor(deficit / params.batchSize) }, () => params.batchSize);
  const rest = deficit % params.batchSize;
  if (rest > 0) sizes.push(params.wholeBatches ? params.batchSize : rest);
  return sizes;
}

async function makeBatches(deps: RefillDeps, sizes: number[], params: RefillParams): Promise<BatchOutcome[]> {
  const outcomes: BatchOutcome[] = [];
  let next = 0;
  let failed = false;
  let enough = false;
  const lane = async (): Promise<void> => {
    while (!failed && !enough && next < sizes.length) {
      const index = next++;
      let outcome: BatchOutcome;
      try {
        // Each batch starts only while the pool, counting every origin's batches, is still short.
        const batchId = await createBatchWhileShort(deps.db, { size: sizes[index]!, target: params.target });
        if (batchId === null) {
          enough = true;
          return;
        }
        outcome = await makeCreatedBatch(deps, batchId, sizes[index]!);
      } catch (error) {
        failed = true;
        throw error;
      }
      outcomes[index] = outcome;
      if (!outcome.ok) failed = true;
      params.onBatch?.(outcome);
    }
  };
  const lanes = Array.from({ length: Math.min(REFILL_IN_FLIGHT, sizes.length) }, lane);
  const thrown = (await Promise.allSettled(lanes)).find((settled) => settled.status === "rejected");
  if (thrown) throw thrown.reason;
  return outcomes.filter((outcome) => outcome !== undefined);
}
