/**
 * Backup envelopes of a key batch inside the enclave (export/verify/restore,
 * docs/operations.md "Backups"). Formats and HPKE live in shared/recovery-envelope.ts.
 *
 * - export: the batch's private keys are sealed twice under the canonical header as associated
 *   data: with HPKE to the sealed recovery encryption key (the copy a recovery opens, offline),
 *   and with AES-256-GCM under a key derived from this enclave's sealing key (the copy
 *   verify_backup opens, since the recovery copy cannot be opened here); the whole is signed by
 *   this enclave's backup signer, so a recovery can tell its envelopes from planted ones.
 * - verify: the sealing-key copy authenticates and every key reproduces its header entry; the
 *   recovery copy names this enclave's recovery key and has exactly the length HPKE gives that
 *   plaintext. Whether the recovery copy opens is what the restore drill proves, in a throwaway
 *   enclave.
 * - load the recovery key: the recovery encryption private key, sealed to one of this enclave's
 *   transport keys, is opened and kept in memory (held-recovery-key.ts) only if its public half is
 *   the one sealed at init.
 * - restore: a backup envelope's recovery copy is opened here with that loaded key (a drill, a
 *   recovery from a backup folder: no wallet key is in plaintext outside an enclave), or a
 *   restore package (the recovery copy re-encrypted offline to one of this enclave's transport
 *   keys, the air-gapped path) is opened; every key is checked against its header entry, and the
 *   keys are returned for import under their original namespace and key_refs.
 */
import { createHash } from "node:crypto";
import { encodeCbor } from "../shared/cbor-frame.ts";
import { equalBytes, fromHex, type Hex, toHex } from "../shared/hex.ts";
import {
  type BackupHeader,
  type BackupSecrets,
  backupSignaturePreimage,
  backupSignerPublicKey,
  HpkeOpenError,
  headerAad,
  hpkeOpen,
  hpkeSeal,
  importX25519PrivateKey,
  isWellFormedBox,
  packageAad,
  parseBackupEnvelope,
  parseRestorePackage,
  parseSecrets,
  RECOVERY_HPKE_INFO,
  RECOVERY_KEY_HPKE_INFO,
  recoveryKeyAad,
  recoveryKeyFingerprint,
  SIGNED_BACKUP_ENVELOPE_KIND,
  signBackupEnvelope,
  TRANSPORT_HPKE_INFO,
  X25519_KEY_BYTES,
  x25519PublicKey,
} from "../shared/recovery-envelope.ts";
import type { EnclaveContext } from "./context.ts";
import { type KeyEntry, type KeyMaterial, type Keystore, materialFromPrivateKey } from "./keystore.ts";
import { type OpOutcome, refuse, succeed } from "./outcome.ts";
import { deriveBackupKey, deriveBackupSignerSeed, SEAL_LABEL, SealError, seal, unseal } from "./sealing.ts";

export type BuiltEnvelope = { envelope: Uint8Array; sha256: Hex };

/** What export and verify read of the enclave: its sealed config, sealing key, keys and clock. */
export type BackupContext = Pick<EnclaveContext, "config" | "sealingKey" | "keystore" | "now">;

/** Seals `keys` of one batch into a v3 envelope, signed by this enclave's backup signer. */
export async function buildBackupEnvelope(
  ctx: BackupContext,
  batch: { batchId: string; namespace: BackupHeader["namespace"]; keys: KeyEntry[] },
): Promise<BuiltEnvelope> {
  const recoveryKey = fromHex(ctx.config.recovery_encryption_key);
  const header: BackupHeader = {
    batch_id: batch.batchId,
    env_id: ctx.config.env_id,
    chain_id: ctx.config.chain_id,
    namespace: batch.namespace,
    created_at: ctx.now().toISOString(),
    recovery_key_sha256: recoveryKeyFingerprint(recoveryKey),
    keys: batch.keys.map((key) => ({ key_ref: key.keyRef, public_key: key.publicKey, address: key.address })),
  };
  const secrets: BackupSecrets = batch.keys.map((key) => ({
    key_ref: key.keyRef,
    private_key: key.privateKey,
  }));
  const plaintext = encodeCbor(secrets);
  const aad = headerAad(header);
  const recovery = await hpkeSeal(recoveryKey, RECOVERY_HPKE_INFO, aad, plaintext);
  const sealed = seal(deriveBackupKey(ctx.sealingKey, ctx.config.env_id), SEAL_LABEL.backup, plaintext, aad);
  const seed = deriveBackupSignerSeed(ctx.sealingKey, ctx.config.env_id);
  const unsigned = {
    v: 3 as const,
    kind: SIGNED_BACKUP_ENVELOPE_KIND,
    header,
    recovery,
    sealed,
    signer: backupSignerPublicKey(seed),
  };
  const signature = signBackupEnvelope(seed, backupSignaturePreimage(unsigned));
  seed.fill(0);
  const envelope = encodeCbor({ ...unsigned, signature });
  return { envelope, sha256: toHex(createHash("sha256").update(envelope).digest()) };
}

/** The public key of this enclave's backup signer, 0x-hex: what a recovery expects envelopes signed by. */
export function backupSignerOf(ctx: Pick<EnclaveContext, "config" | "sealingKey">): Hex {
  const seed = deriveBackupSignerSeed(ctx.sealingKey, ctx.config.env_id);
  try {
    return toHex(backupSignerPublicKey(seed));
  } finally {
    seed.fill(0);
  }
}

export type OpenedBatch = {
  batchId: string;
  namespace: BackupHeader["namespace"];
  keys: KeyMaterial[];
};

/**
 * verify_backup's check of an envelope this enclave exported. Refusals: `malformed` for something
 * that is not a v2 envelope, `seal_failed` for another environment, another recovery key, a copy
 * that does not authenticate or a key that does not reproduce.
 */
export function verifyBackupEnvelope(ctx: BackupContext, raw: Uint8Array): OpOutcome<OpenedBatch> {
  const parsed = parseBackupEnvelope(raw);
  if (!parsed.ok) return refuse("malformed", parsed.error);
  const { header, recovery, sealed } = parsed.value;
  const other = otherEnvironment(ctx, header);
  if (other) return other;
  if (header.recovery_key_sha256 !== recoveryKeyFingerprint(fromHex(ctx.config.recovery_encryption_key))) {
    return refuse("seal_failed", "envelope is sealed to another recovery key than this enclave's");
  }
  let plaintext: Uint8Array;
  try {
    const backupKey = deriveBackupKey(ctx.sealingKey, ctx.config.env_id);
    plaintext = unseal(backupKey, SEAL_LABEL.backup, sealed, headerAad(header));
  } catch (error) {
    if (error instanceof SealError) return refuse("seal_failed", "envelope does not authenticate");
    throw error;
  }
  // The recovery copy seals this same plaintext: HPKE adds exactly the AEAD tag to its length.
  const wellFormed = isWellFormedBox(recovery, plaintext.length);
  const secrets = parseSecrets(plaintext, header);
  if (!wellFormed) return refuse("seal_failed", "envelope's recovery copy is not well formed");
  return keysOfHeader(header, secrets, ctx.keystore);
}

/**
 * restore_backup's opening of a restore package. Refusals: `malformed` for something that is not
 * a package, `seal_failed` for another environment or chain, a transport key this enclave does not
 * hold (expired, or offered before a restart), a package that does not open, or a key that does
 * not reproduce its header entry.
 */
export async function openRestorePackage(
  ctx: EnclaveContext,
  raw: Uint8Array,
): Promise<OpOutcome<OpenedBatch>> {
  const parsed = parseRestorePackage(raw);
  if (!parsed.ok) return refuse("malformed", parsed.error);
  const { header, transport_public_key: transportKey, box } = parsed.value;
  const other = otherEnvironment(ctx, header);
  if (other) return other;
  const privateKey = ctx.transportKeys.privateKeyOf(transportKey, ctx.now());
  if (!privateKey) {
    return refuse(
      "seal_failed",
      "the package's transport key is not held by this enclave (expired, or offered before a restart): ask for a new one",
    );
  }
  let plaintext: Uint8Array;
  try {
    plaintext = await hpkeOpen(privateKey, TRANSPORT_HPKE_INFO, packageAad(header, transportKey), box);
  } catch (error) {
    if (error instanceof HpkeOpenError) return refuse("seal_failed", "restore package does not authenticate");
    throw error;
  }
  const secrets = parseSecrets(plaintext, header);
  return keysOfHeader(header, secrets);
}

/**
 * restore_backup's opening of a backup envelope as it is on disk, with the recovery key that
 * load_recovery_key holds. Refusals: `malformed` for something that is not a v2 envelope,
 * `seal_failed` for another environment, another recovery key, a recovery copy that does not open
 * or a key that does not reproduce its header entry, `not_configured` when no recovery key is held.
 */
export async function openBackupEnvelope(
  ctx: EnclaveContext,
  raw: Uint8Array,
): Promise<OpOutcome<OpenedBatch>> {
  const parsed = parseBackupEnvelope(raw);
  if (!parsed.ok) return refuse("malformed", parsed.error);
  const { header, recovery } = parsed.value;
  const other = otherEnvironment(ctx, header);
  if (other) return other;
  if (header.recovery_key_sha256 !== recoveryKeyFingerprint(fromHex(ctx.config.recovery_encryption_key))) {
    return refuse("seal_failed", "envelope is sealed to another recovery key than this enclave's");
  }
  const recoveryKey = ctx.recoveryKey.privateKey(ctx.now());
  if (!recoveryKey) {
    return refuse(
      "not_configured",
      "no recovery key is loaded (never, expired, or before a restart): load_recovery_key first",
    );
  }
  let plaintext: Uint8Array;
  try {
    plaintext = await hpkeOpen(recoveryKey, RECOVERY_HPKE_INFO, headerAad(header), recovery);
  } catch (error) {
    if (error instanceof HpkeOpenError) {
      return refuse(
        "seal_failed",
        "the recovery copy does not open: the envelope is corrupted or its header was altered",
      );
    }
    throw error;
  }
  return keysOfHeader(header, parseSecrets(plaintext, header));
}

/**
 * load_recovery_key: opens the recovery encryption key sealed to one of this enclave's transport
 * keys and holds it, only if its public half is the recovery encryption key sealed at init.
 * Refusals (`seal_failed`): a transport key this enclave does not hold, a box that does not open,
 * another key.
 */
export async function loadRecoveryKey(
  ctx: EnclaveContext,
  sealed: { transportPublicKey: Uint8Array; enc: Uint8Array; ct: Uint8Array },
): Promise<OpOutcome<{ expiresAt: Date }>> {
  const transportKey = ctx.transportKeys.privateKeyOf(sealed.transportPublicKey, ctx.now());
  if (!transportKey) {
    return refuse(
      "seal_failed",
      "the transport key is not held by this enclave (expired, or offered before a restart): ask for a new one",
    );
  }
  const recoveryPublicKey = fromHex(ctx.config.recovery_encryption_key);
  let privateKey: Uint8Array;
  try {
    privateKey = await hpkeOpen(
      transportKey,
      RECOVERY_KEY_HPKE_INFO,
      recoveryKeyAad(sealed.transportPublicKey, recoveryPublicKey),
      { enc: sealed.enc, ct: sealed.ct },
    );
  } catch (error) {
    if (error instanceof HpkeOpenError) return refuse("seal_failed", "the sealed recovery key does not open");
    throw error;
  }
  try {
    // The one check that matters: only the private half of the key every backup of this enclave
    // is sealed to may be held, whatever the associated data of the box says.
    const isSealedKey =
      privateKey.length === X25519_KEY_BYTES && equalBytes(x25519PublicKey(privateKey), recoveryPublicKey);
    if (!isSealedKey) return refuse("seal_failed", "the key is not this enclave's recovery encryption key");
    const held = await importX25519PrivateKey(privateKey);
    return succeed({ expiresAt: ctx.recoveryKey.hold(held, ctx.now()) });
  } finally {
    privateKey.fill(0);
  }
}

function otherEnvironment(
  ctx: Pick<EnclaveContext, "config">,
  header: BackupHeader,
): OpOutcome<never> | null {
  if (header.env_id !== ctx.config.env_id || header.chain_id !== ctx.config.chain_id) {
    return refuse(
      "seal_failed",
      `backup belongs to env ${header.env_id} on chain ${header.chain_id}, not to this enclave's`,
    );
  }
  return null;
}

/**
 * Every secret must reproduce the public key and address of its header entry. With `held` (verify
 * of this enclave's own export), a secret this enclave holds under its key_ref must be exactly the
 * held key, whose public key and address were derived from it when it was generated: the same proof
 * as deriving them again, without a curve multiplication and a Keccak per key (docs/performance.md,
 * "Provisioning and the key pool"). A secret it does not hold is derived.
 */
function keysOfHeader(
  header: BackupHeader,
  secrets: BackupSecrets | null,
  held?: Pick<Keystore, "get">,
): OpOutcome<OpenedBatch> {
  if (!secrets) return refuse("seal_failed", "backup keys do not match its header");
  const keys: KeyMaterial[] = [];
  for (const [index, secret] of secrets.entries()) {
    const expected = header.keys[index]!;
    const heldKey = held?.get(secret.key_ref);
    const material =
      heldKey && equalBytes(heldKey.privateKey, secret.private_key)
        ? heldKey
        : materialFromPrivateKey(secret.private_key, secret.key_ref);
    const reproduces =
      equalBytes(material.publicKey, expected.public_key) &&
      material.address.toLowerCase() === expected.address.toLowerCase();
    if (!reproduces) return refuse("seal_failed", "backup keys do not reproduce their public keys");
    keys.push(material);
  }
  return succeed({ batchId: header.batch_id, namespace: header.namespace, keys });
}
