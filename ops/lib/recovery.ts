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
  SignerFailure,
} from "../../origin/signer/types.ts";
import { errorMessage } from "../../shared/error-message.ts";
import { fromHex } from "../../shared/hex.ts";
import {
  type BackupSignerPolicy,
  checkBackupSignature,
  x25519PublicKey,
} from "../../shared/recovery-envelope.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { enclaveUnreachable, signerFailureText } from "./enclave-unreachable.ts";
import { checkEnvelopeHeader } from "./envelope-header.ts";
import { loadRecoveryKeyInto } from "./recovery-key-loader.ts";

export type RestoredBatch = {
  batchId: string;
  namespace: string;
  keys: number;
  imported: number;
  /** The restored keys' refs and addresses, as the enclave now holds them. */
  held: { keyRef: string; address: string }[];
  /** True for an unsigned (v2) envelope restored because the operator accepted those: warn. */
  unsigned: boolean;
};

/** One backup or package of a recovery: the batch it restored, or the reason it was refused. */
export type FileRecovery = { file: string; result: Result<RestoredBatch, string> };

export type RecoverParams = {
  signer: SignerClient;
  recoveryAuthority: Uint8Array | { keyPath: string };
  /** Restore packages made elsewhere (ops/recovery-reencrypt.ts), or envelopes the enclave opens. */
  source:
    | {
        kind: "backup-dir";
        dir: string;
        recoveryEncryptionKey: Uint8Array;
        /** The backup signer every envelope must be signed by (the lost enclave's), or v2 let through. */
        signers: BackupSignerPolicy;
      }
    | { kind: "packages"; files: string[] };
  /** Told of each file as it is done (the tool prints it then: a recovery of many batches is long). */
  onFile?: (recovery: FileRecovery) => void;
};

/**
 * Restores each backup or package in turn; one refusal (or unreadable file) does not stop the
 * others. An enclave that stops answering does: it refused nothing, and every file after would
 * fail alike, so that is thrown (the tool's exit 3, docs/operations.md#exit-codes-of-the-operator-tools).
 */
export async function recoverBatches(params: RecoverParams): Promise<FileRecovery[]> {
  const identity = await params.signer.getSealedIdentity();
  if (!identity.ok)
    throw new Error(`the enclave's identity: ${signerFailureText("get_sealed_identity", identity.error)}`);
  const { envId, chainId } = identity.value;
  // Minted for this enclave's own instance id, which the minter reads from it.
  const authorize = createCapabilityMinter({
    authority: params.recoveryAuthority,
    envId,
    chainId,
    client: params.signer,
  });
  const { source } = params;
  const files = source.kind === "packages" ? source.files : await backupFilesIn(source.dir);
  const restore: (bytes: Uint8Array) => Promise<RestoreOutcome> =
    source.kind === "backup-dir"
      ? envelopeRestorer({
          signer: params.signer,
          authorize,
          recoveryEncryptionKey: source.recoveryEncryptionKey,
          recoveryPublicKey: fromHex(identity.value.recoveryEncryptionKey),
          expect: { envId, chainId },
          signers: source.signers,
        })
      : async (bytes) => {
          const restored = await params.signer.restoreBackup({ package: bytes }, authorize);
          return restored.ok ? ok({ ...restored.value, unsigned: false }) : restoreFailure(restored.error);
        };

  const results: FileRecovery[] = [];
  for (const file of files) {
    // A file that cannot be read is refused as any other: the rest of the folder is still restored.
    let bytes: Uint8Array;
    try {
      bytes = new Uint8Array(await readFile(file));
    } catch (error) {
      const recovery = { file, result: err(`cannot read the file: ${errorMessage(error)}`) };
      results.push(recovery);
      params.onFile?.(recovery);
      continue;
    }
    const restored = await restore(bytes);
    if (!restored.ok && restored.error.unreachable) throw new Error(`${file}: ${restored.error.message}`);
    const recovery: FileRecovery = {
      file,
      result: restored.ok
        ? ok({
            batchId: restored.value.batchId,
            namespace: restored.value.namespace,
            keys: restored.value.keys.length,
            imported: restored.value.imported,
            held: restored.value.keys.map((key) => ({ keyRef: key.keyRef, address: key.address })),
            unsigned: restored.value.unsigned,
          })
        : err(restored.error.message),
    };
    results.push(recovery);
    params.onFile?.(recovery);
  }
  return results;
}

/** The backup envelopes of a folder, by name (the backup writer's hidden temporary files left out). */
export async function backupFilesIn(dir: string): Promise<string[]> {
  return (await readdir(dir))
    .filter((name) => name.endsWith(".backup") && !name.startsWith("."))
    .sort()
    .map((name) => path.join(dir, name));
}

/**
 * What the enclave restored, or the reason the file was not (for the operator): `unreachable` when
 * the enclave never answered, rather than refused.
 */
type RestoreOutcome = Result<
  RestoreBackupResult & { unsigned: boolean },
  { message: string; unreachable: boolean }
>;

function restoreFailure(error: SignerFailure): RestoreOutcome {
  return err({ message: signerFailureText("restore_backup", error), unreachable: enclaveUnreachable(error) });
}

/**
 * restore_backup of envelopes as they are on disk. Each header and signature is checked here
 * first, so a wrong envelope is refused by name before the enclave is asked to open anything: the
 * backup folder lives on the origin host, and an envelope anyone made with the public recovery key
 * would otherwise put keys its maker knows into the new enclave. The recovery key is
 * loaded into the enclave before the first one and again whenever the enclave answers
 * not_configured (it holds the key an hour at most, and forgets it at a restart).
 */
function envelopeRestorer(params: {
  signer: SignerClient;
  authorize: CapabilityProvider;
  recoveryEncryptionKey: Uint8Array;
  recoveryPublicKey: Uint8Array;
  expect: { envId: string; chainId: number };
  signers: BackupSignerPolicy;
}): (envelope: Uint8Array) => Promise<RestoreOutcome> {
  let loaded = false;
  return async (envelope) => {
    const checked = checkEnvelopeHeader({
      envelope,
      recoveryPublicKey: x25519PublicKey(params.recoveryEncryptionKey),
      expect: params.expect,
    });
    if (!checked.ok) return err({ message: checked.error.reason, unreachable: false });
    const signed = checkBackupSignature(checked.value.envelope, params.signers);
    if (!signed.ok) return err({ message: signed.error, unreachable: false });
    for (let attempt = 0; attempt < 2; attempt += 1) {
      if (!loaded) {
        const load = await loadRecoveryKeyInto(params);
        if (!load.ok) return load;
        loaded = true;
      }
      const restored = await params.signer.restoreBackup({ envelope }, params.authorize);
      if (restored.ok) return ok({ ...restored.value, unsigned: signed.value });
      if (restored.error.code !== "not_configured") return restoreFailure(restored.error);
      loaded = false;
    }
    return err({
      message: "restore_backup: not_configured: the enclave did not keep the recovery key",
      unreachable: false,
    });
  };
}

/** The key's batch, its namespace and the backup file that was written and verified. */
export type BackedUpKey = { batchId: string; namespace: string; path: string };

/**
 * The backup, or the reason it was not made (for the operator) and whether the enclave went
 * unanswered (no socket, a timeout, a dropped connection) rather than refused: an error, exit 3,
 * not a refusal (docs/operations.md#exit-codes-of-the-operator-tools).
 */
export type BackupKeyResult = Result<BackedUpKey, { message: string; unreachable: boolean }>;

function refusedBackup(message: string): BackupKeyResult {
  return err({ message, unreachable: false });
}

function signerBackupFailure(op: string, failure: SignerFailure): BackupKeyResult {
  return err({ message: signerFailureText(op, failure), unreachable: enclaveUnreachable(failure) });
}

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
  if (!identity.ok) return signerBackupFailure("public_identity", identity.error);
  const { batchId, namespace, envId, chainId } = identity.value;
  const authorize = createCapabilityMinter({
    authority: params.adminAuthority,
    envId,
    chainId,
    client: params.signer,
  });
  const exported = await params.signer.exportBackup({ batchId, keyRefs: [params.keyRef] }, authorize);
  if (!exported.ok) return signerBackupFailure("export_backup", exported.error);
  const written = await writeBackup({
    dir: params.backupDir,
    batchId,
    envelope: exported.value.envelope,
    expectedSha256: exported.value.sha256,
  });
  if (!written.ok) return refusedBackup(`backup_writer: ${written.error.code}: ${written.error.detail}`);
  const file = await readBackup(written.value.path, written.value.sha256);
  if (!file.ok) return refusedBackup(`backup_file ${written.value.path}: ${file.error}`);
  const verified = await params.signer.verifyBackup({ envelope: file.value });
  if (!verified.ok) return signerBackupFailure("verify_backup", verified.error);
  const same = verified.value.keys.length === 1 && verified.value.keys[0]!.keyRef === params.keyRef;
  if (!same) return refusedBackup("verify_backup: the backup holds other keys");
  return ok({ batchId, namespace, path: written.value.path });
}
