/**
 * A real recovery (issue 15, README "Disaster recovery"): every backup envelope of a folder is
 * re-encrypted with the offline recovery encryption key to a transport key the (new) enclave
 * offered, and restored with a capability of the offline recovery authority, into its original
 * namespace under its original key_refs. Already restored batches answer imported 0 (idempotent),
 * so a recovery that stopped half way is simply run again.
 */
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
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
