import { createHash } from "node:crypto";
import { eq } from "drizzle-orm";
import type { Db } from "../db/client.ts";
import { keyBatches, keyPool, restoreEvidence } from "../db/schema.ts";
import type { CapabilityProvider, SignerClient } from "../signer/types.ts";
import { readBackup } from "./backup-writer.ts";

export type RestoreDrillResult =
  | { ok: true; batchId: string; keys: number; scratchNamespace: string }
  | { ok: false; reason: string };

/**
 * DESIGN §8: restores a batch's backup (recovery capability) into a scratch namespace of the
 * enclave and compares every public key with what the pool recorded. Only an exact match
 * records restore evidence; nothing else is written.
 */
export async function runRestoreDrill(
  db: Db,
  signer: SignerClient,
  authorize: CapabilityProvider,
  batchId: string,
): Promise<RestoreDrillResult> {
  const [batch] = await db.select().from(keyBatches).where(eq(keyBatches.batchId, batchId));
  if (!batch) return { ok: false, reason: `no batch ${batchId}` };
  if (batch.status !== "available" && batch.status !== "backup_verified") {
    return { ok: false, reason: `batch is ${batch.status}; only a verified backup can be drilled` };
  }
  if (!batch.backupPath || !batch.backupSha256) return { ok: false, reason: "batch has no recorded backup" };
  const file = await readBackup(batch.backupPath, batch.backupSha256);
  if (!file.ok) return { ok: false, reason: `backup file ${file.reason}` };

  const restored = await signer.restoreBackup({ envelope: file.envelope }, authorize);
  if (!restored.ok)
    return { ok: false, reason: `restore_backup: ${restored.error.code}: ${restored.error.reason}` };

  const recorded = await db
    .select({ keyRef: keyPool.keyRef, publicKey: keyPool.publicKey })
    .from(keyPool)
    .where(eq(keyPool.batchId, batchId));
  const expected = new Map(recorded.map((key) => [key.keyRef, key.publicKey.toLowerCase()]));
  const got = restored.value.keys;
  const mismatched = got.filter((key) => expected.get(key.sourceKeyRef) !== key.publicKey.toLowerCase());
  if (got.length !== expected.size || mismatched.length > 0 || restored.value.batchId !== batchId) {
    return {
      ok: false,
      reason: `restored keys differ from the batch (${mismatched.length} mismatched of ${got.length})`,
    };
  }
  const digest = createHash("sha256")
    .update(
      [...expected.entries()]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([, key]) => key)
        .join(","),
    )
    .digest("hex");
  await db.insert(restoreEvidence).values({
    batchId,
    scratchNamespace: restored.value.namespace,
    keyCount: got.length,
    publicKeysSha256: digest,
  });
  return { ok: true, batchId, keys: got.length, scratchNamespace: restored.value.namespace };
}
