/**
 * Backing up keys outside the refill, and a real recovery (issue 15, README "Disaster recovery"): every backup envelope of a folder is
 * re-encrypted with the offline recovery encryption key to a transport key the (new) enclave
 * offered, and restored with a capability of the offline recovery authority, into its original
 * namespace under its original key_refs. Already restored batches answer imported 0 (idempotent),
 * so a recovery that stopped half way is simply run again.
 */
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { readBackup, writeBackup } from "../../origin/keypool/backup-writer.ts";
import { createCapabilityMinter } from "../../origin/signer/capability-minter.ts";
import type { SignerClient } from "../../origin/signer/types.ts";
import { fromHex } from "../../shared/hex.ts";
import { reencryptForTransport } from "./recovery-reencrypt.ts";

export type RecoveredBatch =
  | { file: string; ok: true; batchId: string; namespace: string; keys: number; imported: number }
  | { file: string; ok: false; reason: string };

export type RecoverParams = {
  signer: SignerClient;
  recoveryAuthority: Uint8Array | { keyPath: string };
  /** Restore packages made elsewhere (scripts/recovery-reencrypt.ts), or envelopes to re-encrypt here. */
  source:
    | { kind: "backup-dir"; dir: string; recoveryEncryptionKey: Uint8Array }
    | { kind: "packages"; files: string[] };
};

/** Restores each backup or package in turn; one refusal does not stop the others. */
export async function recoverBatches(params: RecoverParams): Promise<RecoveredBatch[]> {
  const identity = await params.signer.getSealedIdentity();
  if (!identity.ok)
    throw new Error(`the enclave's identity: ${identity.error.code}: ${identity.error.reason}`);
  const { envId, chainId } = identity.value;
  const authorize = createCapabilityMinter({
    authority: params.recoveryAuthority,
    envId,
    chainId,
    client: params.signer,
  });
  const files =
    params.source.kind === "packages"
      ? params.source.files
      : (await readdir(params.source.dir))
          .filter((name) => name.endsWith(".backup") && !name.startsWith("."))
          .sort()
          .map((name) => path.join((params.source as { dir: string }).dir, name));

  let transportKey: Uint8Array | undefined;
  const results: RecoveredBatch[] = [];
  for (const file of files) {
    let restorePackage: Uint8Array;
    if (params.source.kind === "packages") {
      restorePackage = new Uint8Array(await readFile(file));
    } else {
      if (!transportKey) {
        const offered = await params.signer.newTransportKey();
        if (!offered.ok) throw new Error(`new_transport_key: ${offered.error.code}`);
        transportKey = fromHex(offered.value.transportPublicKey);
      }
      const reencrypted = await reencryptForTransport({
        envelope: new Uint8Array(await readFile(file)),
        recoveryPrivateKey: params.source.recoveryEncryptionKey,
        transportPublicKey: transportKey,
        expect: { envId, chainId },
      });
      if (!reencrypted.ok) {
        results.push({ file, ok: false, reason: reencrypted.reason });
        continue;
      }
      restorePackage = reencrypted.package;
    }
    const restored = await params.signer.restoreBackup({ package: restorePackage }, authorize);
    if (!restored.ok) {
      results.push({
        file,
        ok: false,
        reason: `restore_backup: ${restored.error.code}: ${restored.error.reason}`,
      });
      continue;
    }
    results.push({
      file,
      ok: true,
      batchId: restored.value.batchId,
      namespace: restored.value.namespace,
      keys: restored.value.keys.length,
      imported: restored.value.imported,
    });
  }
  return results;
}

export type BackupKeyResult =
  | { ok: true; batchId: string; namespace: string; path: string }
  | { ok: false; reason: string };

/**
 * Backs up the batch of one key that the refill does not back up (the faucet treasury key made by
 * configure_treasury, later the settler key): export_backup under the admin authority, the backup
 * writer's temporary file, rename and re-read check, then verify_backup of the file's bytes.
 * Such a batch holds that one key; a batch with others is refused by the enclave.
 */
export async function backupKey(params: {
  signer: SignerClient;
  adminAuthority: Uint8Array | { keyPath: string };
  keyRef: string;
  backupDir: string;
}): Promise<BackupKeyResult> {
  const identity = await params.signer.publicIdentity({ keyRef: params.keyRef });
  if (!identity.ok) return { ok: false, reason: `public_identity: ${identity.error.code}` };
  const { batchId, namespace, envId, chainId } = identity.value;
  const authorize = createCapabilityMinter({
    authority: params.adminAuthority,
    envId,
    chainId,
    client: params.signer,
  });
  const exported = await params.signer.exportBackup({ batchId, keyRefs: [params.keyRef] }, authorize);
  if (!exported.ok)
    return { ok: false, reason: `export_backup: ${exported.error.code}: ${exported.error.reason}` };
  const written = await writeBackup({
    dir: params.backupDir,
    batchId,
    envelope: exported.value.envelope,
    expectedSha256: exported.value.sha256,
  });
  if (!written.ok) return { ok: false, reason: `backup_writer: ${written.reason}: ${written.detail}` };
  const file = await readBackup(written.value.path, written.value.sha256);
  if (!file.ok) return { ok: false, reason: `backup_file: ${file.reason}` };
  const verified = await params.signer.verifyBackup({ envelope: file.envelope });
  if (!verified.ok)
    return { ok: false, reason: `verify_backup: ${verified.error.code}: ${verified.error.reason}` };
  const same = verified.value.keys.length === 1 && verified.value.keys[0]!.keyRef === params.keyRef;
  if (!same) return { ok: false, reason: "verify_backup: the backup holds other keys" };
  return { ok: true, batchId, namespace, path: written.value.path };
}
