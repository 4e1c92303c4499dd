/**
 * Backing up keys outside the refill, and a real recovery (docs/operations.md "Disaster recovery"): the
 * offline recovery encryption key is loaded into the (new) enclave sealed to one of its transport
 * keys (recovery-key-loader.ts), and every backup envelope of a folder is sent as it is on disk
 * and restored with a capability of the offline recovery authority, into its original namespace
 * under its original key_refs: the enclave opens each recovery copy itself, so no wallet private
 * key is in plaintext in this process. Restore packages made on an air-gapped machine
 * (ops/recovery-reencrypt.ts) are restored as they are. Already restored batches answer
 * imported 0 (idempotent), so a recovery that stopped half way is simply run again.
 */
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { readBackup, writeBackup } from "../../origin/backup-store.ts";
import { createCapabilityMinter } from "../../origin/signer/capability-minter.ts";
import type {
  CapabilityProvider,
  RestoreBackupResult,
  SignerClient,
  SignerResult,
} from "../../origin/signer/types.ts";
import { fromHex } from "../../shared/hex.ts";
import { x25519PublicKey } from "../../shared/recovery-envelope.ts";
import { checkEnvelopeHeader } from "./envelope-header.ts";
import { loadRecoveryKeyInto } from "./recovery-key-loader.ts";

export type RecoveredBatch =
  | {
      file: string;
      ok: true;
      batchId: string;
      namespace: string;
      keys: number;
      imported: number;
      /** The restored keys' refs and addresses, as the enclave now holds them. */
      held: { keyRef: string; address: string }[];
    }
  | { file: string; ok: false; reason: string };

export type RecoverParams = {
  signer: SignerClient;
  recoveryAuthority: Uint8Array | { keyPath: string };
  /** Restore packages made elsewhere (ops/recovery-reencrypt.ts), or envelopes the enclave opens. */
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
  // Minted for this enclave's own instance id, which the minter reads from it.
  const authorize = createCapabilityMinter({
    authority: params.recoveryAuthority,
    envId,
    chainId,
    client: params.signer,
  });
  const { source } = params;
  const files =
    source.kind === "packages"
      ? source.files
      : (await readdir(source.dir))
          .filter((name) => name.endsWith(".backup") && !name.startsWith("."))
          .sort()
          .map((name) => path.join(source.dir, name));
  const restoreEnvelope =
    source.kind === "backup-dir"
      ? envelopeRestorer({
          signer: params.signer,
          authorize,
          recoveryEncryptionKey: source.recoveryEncryptionKey,
          recoveryPublicKey: fromHex(identity.value.recoveryEncryptionKey),
          expect: { envId, chainId },
        })
      : undefined;

  const results: RecoveredBatch[] = [];
  for (const file of files) {
    const bytes = new Uint8Array(await readFile(file));
    const restored: RestoreOutcome = restoreEnvelope
      ? await restoreEnvelope(bytes)
      : await params.signer.restoreBackup({ package: bytes }, authorize);
    if (!restored.ok) {
      const reason =
        "refused" in restored
          ? restored.refused
          : `restore_backup: ${restored.error.code}: ${restored.error.reason}`;
      results.push({ file, ok: false, reason });
      continue;
    }
    results.push({
      file,
      ok: true,
      batchId: restored.value.batchId,
      namespace: restored.value.namespace,
      keys: restored.value.keys.length,
      imported: restored.value.imported,
      held: restored.value.keys.map((key) => ({ keyRef: key.keyRef, address: key.address })),
    });
  }
  return results;
}

type RestoreOutcome = SignerResult<RestoreBackupResult> | { ok: false; refused: string };

/**
 * restore_backup of envelopes as they are on disk. Each header is checked here first, so a wrong
 * envelope is refused by name before the enclave is asked to open anything; the recovery key is
 * loaded into the enclave before the first one and again whenever the enclave answers
 * not_configured (it holds the key an hour at most, and forgets it at a restart).
 */
function envelopeRestorer(params: {
  signer: SignerClient;
  authorize: CapabilityProvider;
  recoveryEncryptionKey: Uint8Array;
  recoveryPublicKey: Uint8Array;
  expect: { envId: string; chainId: number };
}): (envelope: Uint8Array) => Promise<RestoreOutcome> {
  let loaded = false;
  return async (envelope) => {
    const checked = checkEnvelopeHeader({
      envelope,
      recoveryPublicKey: x25519PublicKey(params.recoveryEncryptionKey),
      expect: params.expect,
    });
    if (!checked.ok) return { ok: false, refused: checked.reason };
    for (let attempt = 0; attempt < 2; attempt += 1) {
      if (!loaded) {
        const load = await loadRecoveryKeyInto(params);
        if (!load.ok) return { ok: false, refused: load.error };
        loaded = true;
      }
      const restored = await params.signer.restoreBackup({ envelope }, params.authorize);
      if (restored.ok || restored.error.code !== "not_configured") return restored;
      loaded = false;
    }
    return {
      ok: false,
      refused: "restore_backup: not_configured: the enclave did not keep the recovery key",
    };
  };
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
  if (!written.ok)
    return { ok: false, reason: `backup_writer: ${written.error.reason}: ${written.error.detail}` };
  const file = await readBackup(written.value.path, written.value.sha256);
  if (!file.ok) return { ok: false, reason: `backup_file: ${file.error}` };
  const verified = await params.signer.verifyBackup({ envelope: file.value });
  if (!verified.ok)
    return { ok: false, reason: `verify_backup: ${verified.error.code}: ${verified.error.reason}` };
  const same = verified.value.keys.length === 1 && verified.value.keys[0]!.keyRef === params.keyRef;
  if (!same) return { ok: false, reason: "verify_backup: the backup holds other keys" };
  return { ok: true, batchId, namespace, path: written.value.path };
}
