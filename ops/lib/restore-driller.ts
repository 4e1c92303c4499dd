/**
 * The restore drill (docs/operations.md, "Restore drills"): proves that a batch's backup brings its keys back
 * without the enclave that made it. A throwaway enclave (throwaway-enclave.ts: the real program on a
 * temporary data folder, initialised with the live enclave's public identity only) is given the recovery
 * encryption key sealed to one of its transport keys (recovery-key-loader.ts) and the backup
 * envelope as it is on disk; it opens the recovery copy itself and restore_backup imports it under
 * a recovery capability. This process carries only ciphertext: no wallet private key is ever in
 * plaintext outside an enclave (ops/recovery-paths.test.ts keeps it so). Every key_ref, public
 * key and address must equal the pool's records; one restored key signs an identity proof that
 * must verify against the pool's wallet. Only then is restore evidence recorded. A refusal records
 * nothing.
 *
 * A `RestoreDriller` starts its throwaway enclave on the first drill and drills any number of
 * batches with it (an enclave start costs a second or two); `close` stops it and deletes its
 * folder, so nothing restored stays anywhere.
 */
import { createHash, randomBytes } from "node:crypto";
import { eq, sql } from "drizzle-orm";
import type { Address } from "viem";
import { readBackup } from "../../origin/backup-store.ts";
import { type Db, queryRows } from "../../origin/db/client.ts";
import { keyBatches, keyPool, RESTORE_METHOD_NEW_ENCLAVE, restoreEvidence } from "../../origin/db/schema.ts";
import { createCapabilityMinter } from "../../origin/signer/capability-minter.ts";
import type { SealedIdentity } from "../../origin/signer/types.ts";
import { errorMessage } from "../../shared/error-message.ts";
import { fromHex, toHex } from "../../shared/hex.ts";
import { verifyIdentityProof } from "../../shared/identity-proof.ts";
import {
  type BackupSignerPolicy,
  checkBackupSignature,
  x25519PublicKey,
} from "../../shared/recovery-envelope.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { signerFailureText } from "./enclave-unreachable.ts";
import { checkEnvelopeHeader } from "./envelope-header.ts";
import { loadRecoveryKeyInto } from "./recovery-key-loader.ts";
import { startThrowawayEnclave, type ThrowawayEnclave } from "./throwaway-enclave.ts";

/**
 * The batches a drill has not yet proven, oldest first: backed up and verified (`available`) with
 * no restore evidence, so the funding gate holds their wallets.
 */
export async function pendingDrillBatches(db: Db): Promise<string[]> {
  const rows = await queryRows<{ batch_id: string }>(
    db,
    sql`select b.batch_id from key_batches b
        where b.status = 'available' and not exists (select 1 from restore_evidence r
          where r.batch_id = b.batch_id and r.method = ${RESTORE_METHOD_NEW_ENCLAVE})
        order by b.created_at, b.batch_id`,
  );
  return rows.map((row) => row.batch_id);
}

/** What the drill restored and proved, or why it failed (for the operator). */
export type RestoreDrillResult = Result<
  {
    batchId: string;
    keys: number;
    provenKeyRef: string;
    /** The backup file, when it was an unsigned (v2) envelope let through by the operator: warn. */
    unsignedFile: string | null;
  },
  string
>;

export type RestoreDrillerOptions = {
  /** The live enclave's sealed identity (get_sealed_identity): the throwaway is initialised with it. */
  identity: SealedIdentity;
  /** The recovery authority (Ed25519 seed or its key file): signs restore_backup's capability. */
  recoveryAuthority: Uint8Array | { keyPath: string };
  /**
   * The recovery encryption key (X25519 private key): sealed to the throwaway enclave, which opens
   * the envelopes' recovery copies with it; never used to open one here.
   */
  recoveryEncryptionKey: Uint8Array;
  /**
   * The backup signer every envelope must be signed by, and whether unsigned (v2) envelopes made
   * before backups were signed pass. By default the live enclave's (identity.backupSigner), none.
   */
  signers?: BackupSignerPolicy;
  /** Receives the throwaway enclave's log lines. */
  onLog?: (line: string) => void;
  /**
   * Tests only: starts the throwaway enclave (a fault put in front of it); startThrowawayEnclave otherwise.
   */
  startEnclave?: typeof startThrowawayEnclave;
};

export type RestoreDriller = {
  /** Drills one batch; records restore evidence only when the throwaway enclave reproduces it. */
  drill(db: Db, batchId: string): Promise<RestoreDrillResult>;
  /**
   * Stops the throwaway enclave and deletes its folder (if one was started). Final: a drill after
   * it (a loop still running when Ctrl-C closed it) is refused and starts no other enclave.
   */
  close(): Promise<void>;
};

/** A driller whose throwaway enclave starts on the first drill; see the module comment. */
export function createRestoreDriller(options: RestoreDrillerOptions): RestoreDriller {
  let started: Promise<ThrowawayEnclave> | undefined;
  let closed = false;
  const target = (): Promise<ThrowawayEnclave> => {
    if (closed) return Promise.reject(new Error("the drill was stopped"));
    started ??= (options.startEnclave ?? startThrowawayEnclave)({
      identity: options.identity,
      onLog: options.onLog,
    });
    // A failed start is not kept: the next drill tries again.
    started.catch(() => {
      started = undefined;
    });
    return started;
  };
  return {
    drill: (db, batchId) => drillInto(db, target, options, batchId),
    async close() {
      closed = true;
      const current = started;
      started = undefined;
      if (current) await (await current.catch(() => undefined))?.close();
    },
  };
}

async function drillInto(
  db: Db,
  target: () => Promise<ThrowawayEnclave>,
  options: RestoreDrillerOptions,
  batchId: string,
): Promise<RestoreDrillResult> {
  const [batch] = await db.select().from(keyBatches).where(eq(keyBatches.batchId, batchId));
  if (!batch) return err(`no batch ${batchId}`);
  if (batch.status !== "available" && batch.status !== "backup_verified") {
    return err(`batch is ${batch.status}; only a verified backup can be drilled`);
  }
  if (!batch.backupPath || !batch.backupSha256) return err("batch has no recorded backup");
  const file = await readBackup(batch.backupPath, batch.backupSha256);
  if (!file.ok) return err(`backup file ${batch.backupPath}: ${file.error}`);

  // The envelope's header is checked before any enclave starts: a refusal costs nothing.
  const checked = checkEnvelopeHeader({
    envelope: file.value,
    recoveryPublicKey: x25519PublicKey(options.recoveryEncryptionKey),
    expect: { envId: options.identity.envId, chainId: options.identity.chainId, batchId },
  });
  if (!checked.ok) return err(checked.error.reason);
  // The backup folder and the pool's records live on the origin host: an envelope anyone made with
  // the public recovery key, matched by rows they wrote, would otherwise be drilled as proven.
  const signed = checkBackupSignature(
    checked.value.envelope,
    options.signers ?? { expected: fromHex(options.identity.backupSigner), acceptUnsigned: false },
  );
  if (!signed.ok) return err(`backup file ${batch.backupPath}: ${signed.error}`);

  let enclave: ThrowawayEnclave;
  try {
    enclave = await target();
  } catch (error) {
    return err(`throwaway enclave: ${errorMessage(error)}`);
  }
  // Minted for the throwaway enclave's own instance id, which the minter reads from it.
  const authorize = createCapabilityMinter({
    authority: options.recoveryAuthority,
    envId: options.identity.envId,
    chainId: options.identity.chainId,
    client: enclave.signer,
  });
  // Loaded for each drill: the enclave holds the key an hour at most, and a drill is short.
  const loaded = await loadRecoveryKeyInto({
    signer: enclave.signer,
    recoveryEncryptionKey: options.recoveryEncryptionKey,
    recoveryPublicKey: fromHex(options.identity.recoveryEncryptionKey),
    authorize,
  });
  if (!loaded.ok) return err(loaded.error.message);
  const restored = await enclave.signer.restoreBackup({ envelope: file.value }, authorize);
  if (!restored.ok) {
    return err(signerFailureText("restore_backup", restored.error));
  }

  const recorded = await db
    .select({ keyRef: keyPool.keyRef, publicKey: keyPool.publicKey, address: keyPool.address })
    .from(keyPool)
    .where(eq(keyPool.batchId, batchId));
  const expected = new Map(recorded.map((key) => [key.keyRef, key]));
  const got = restored.value.keys;
  const mismatched = got.filter((key) => {
    const pool = expected.get(key.keyRef);
    return (
      pool?.publicKey.toLowerCase() !== key.publicKey.toLowerCase() ||
      pool.address.toLowerCase() !== key.address.toLowerCase()
    );
  });
  if (got.length !== expected.size || mismatched.length > 0 || restored.value.batchId !== batchId) {
    return err(
      `restored keys differ from the batch (${mismatched.length} mismatched of ${got.length}, ${expected.size} in the pool)`,
    );
  }

  // A test message signed by one restored key: the throwaway enclave must hold the private key,
  // not just report its public half.
  const proven = [...recorded].sort((a, b) => a.keyRef.localeCompare(b.keyRef))[0]!;
  const nonce = toHex(randomBytes(32));
  const proof = await enclave.signer.proveIdentity({ keyRef: proven.keyRef, verifierNonce: nonce });
  if (!proof.ok) return err(signerFailureText("prove_identity", proof.error));
  const verified = verifyIdentityProof({
    chainId: options.identity.chainId,
    envId: options.identity.envId,
    keyRef: proven.keyRef,
    storedWallet: proven.address as Address,
    verifierNonce: nonce,
    publicKey: proof.value.publicKey,
    address: proof.value.address,
    signature: proof.value.signature,
  });
  if (!verified.ok) return err(`the restored key's signature does not verify (${verified.error})`);

  await db.insert(restoreEvidence).values({
    batchId,
    method: RESTORE_METHOD_NEW_ENCLAVE,
    keyCount: got.length,
    publicKeysSha256: publicKeysDigest(recorded.map((key) => [key.keyRef, key.publicKey])),
    recoveryKeySha256: checked.value.header.recovery_key_sha256,
    provenKeyRef: proven.keyRef,
  });
  return ok({
    batchId,
    keys: got.length,
    provenKeyRef: proven.keyRef,
    unsignedFile: signed.value ? batch.backupPath : null,
  });
}

/** SHA-256 (hex) over the batch's public keys in key_ref order (what the evidence row names). */
function publicKeysDigest(keys: Array<[string, string]>): string {
  const joined = [...keys]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([, publicKey]) => publicKey.toLowerCase())
    .join(",");
  return createHash("sha256").update(joined).digest("hex");
}
