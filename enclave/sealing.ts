/**
 * Sealing at rest: AES-256-GCM under the enclave sealing key. Each blob is
 * version (1) ‖ iv (12) ‖ tag (16) ‖ ciphertext, with a purpose label as associated data so a blob
 * sealed for one purpose (say, the state file) never unseals as another (say, a key set).
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";

const SEAL_VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** How much longer a sealed blob is than its plaintext. */
export const SEAL_OVERHEAD_BYTES = 1 + IV_BYTES + TAG_BYTES;
export const SEALING_KEY_BYTES = 32;

/** Purpose labels bound into each sealed blob. */
export const SEAL_LABEL = {
  config: "svc-hsm/sealed-config/v1",
  keySet: "svc-hsm/key-set/v1",
  state: "svc-hsm/state/v1",
  stateJournal: "svc-hsm/state-journal/v1",
  backup: "svc-hsm/backup/v1",
  backupSigner: "svc-hsm/backup-signer/v1",
} as const;
export type SealLabel = (typeof SEAL_LABEL)[keyof typeof SEAL_LABEL];

/** Sealing or unsealing failed (wrong key, tampered or truncated blob): answered `seal_failed`. */
export class SealError extends Error {
  override readonly name = "SealError";
}

/** Encrypts and authenticates `plaintext` for `label` (extra associated data optional). */
export function seal(key: Uint8Array, label: SealLabel, plaintext: Uint8Array, aad?: Uint8Array): Uint8Array {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(associatedData(label, aad));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  const tag = cipher.getAuthTag();
  return Buffer.concat([Buffer.of(SEAL_VERSION), iv, tag, ciphertext]);
}

/** Decrypts a blob made by seal(); throws SealError when anything does not authenticate. */
export function unseal(key: Uint8Array, label: SealLabel, blob: Uint8Array, aad?: Uint8Array): Uint8Array {
  if (blob.length < 1 + IV_BYTES + TAG_BYTES || blob[0] !== SEAL_VERSION) {
    throw new SealError("sealed blob has an unknown format");
  }
  const iv = blob.subarray(1, 1 + IV_BYTES);
  const tag = blob.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
  const ciphertext = blob.subarray(1 + IV_BYTES + TAG_BYTES);
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, iv);
    decipher.setAAD(associatedData(label, aad));
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(ciphertext), decipher.final()]);
  } catch (cause) {
    throw new SealError("sealed blob does not authenticate", { cause });
  }
}

/**
 * The backup key: HKDF-SHA256 of the sealing key, bound to the environment, so an envelope opens
 * only in an enclave holding the same sealing key for the same env id.
 */
export function deriveBackupKey(sealingKey: Uint8Array, envId: string): Uint8Array {
  return new Uint8Array(hkdfSync("sha256", sealingKey, SEAL_LABEL.backup, `env:${envId}`, SEALING_KEY_BYTES));
}

/**
 * The seed of the backup signer (Ed25519) that signs every backup envelope: HKDF-SHA256 of the
 * sealing key, bound to the environment. Derived rather than drawn and sealed, so an enclave
 * initialised before backups were signed has one from its first start, with no sealed-state
 * upgrade, and it is exactly as secret (and as lasting) as the sealing key itself.
 */
export function deriveBackupSignerSeed(sealingKey: Uint8Array, envId: string): Uint8Array {
  return new Uint8Array(
    hkdfSync("sha256", sealingKey, SEAL_LABEL.backupSigner, `env:${envId}`, SEALING_KEY_BYTES),
  );
}

/** A fresh sealing key. */
export function generateSealingKey(): Uint8Array {
  return new Uint8Array(randomBytes(SEALING_KEY_BYTES));
}

function associatedData(label: SealLabel, extra?: Uint8Array): Uint8Array {
  const labelBytes = Buffer.from(label, "utf8");
  return extra ? Buffer.concat([labelBytes, Buffer.of(0), extra]) : labelBytes;
}
