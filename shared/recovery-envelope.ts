/**
 * Backup envelopes and restore packages (docs/operations.md, "Backups" and "Disaster recovery"): the formats
 * both the enclave and the operator's offline scripts read, and the HPKE (RFC 9180) that carries key material
 * between them.
 *
 * - Backup envelope v3 (made by export_backup): a plaintext header (batch, env, chain, namespace,
 *   key refs, public keys, addresses, the recovery encryption key's fingerprint), the batch's
 *   private keys sealed with HPKE to the offline recovery encryption key (X25519), and a second
 *   copy under the enclave's sealing key that only that enclave can open (for verify_backup).
 *   The canonical CBOR of the header is the associated data of both copies. HPKE base mode does
 *   not authenticate the sender: anyone holding the public recovery key can seal keys of their
 *   choosing under any header. So v3 adds the enclave's backup signer (Ed25519, derived from its
 *   sealing key) and its signature over everything else in the envelope; a recovery imports only
 *   envelopes signed by the key the operator names (verifyBackupSignature). v2 is the same without
 *   the signature, made before it existed, and restored only when the operator accepts that.
 * - Restore package (made offline by the operator's re-encryption step): the same header and the
 *   private keys sealed with HPKE to the transport key a (new) enclave offered; the associated
 *   data binds the header and that transport key, so a package opens only in the enclave that
 *   offered the key and only for the batch its header names.
 * - Sealed recovery key (made by a drill or a recovery): the recovery encryption private key
 *   sealed with HPKE to a transport key an enclave offered, so that enclave opens the backup
 *   envelopes' recovery copies itself (load_recovery_key, then restore_backup of the envelope as
 *   it is on disk) and the wallet keys are never in plaintext outside an enclave. The associated
 *   data binds the transport key and the recovery public key it must be the private half of.
 *
 * Suite: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM, base mode, with a distinct `info`
 * label per use. Runtime-neutral (WebCrypto via @hpke/core): no `node:` imports.
 */
import { Aes256Gcm, CipherSuite, DhkemX25519HkdfSha256, HkdfSha256 } from "@hpke/core";
import { ed25519, x25519 } from "@noble/curves/ed25519";
import { sha256 } from "@noble/hashes/sha2";
import * as z from "zod";
import { encodeCanonicalCbor } from "./canonical-cbor.ts";
import { decodeCbor } from "./cbor-frame.ts";
import { bytesSchema, KEY_NAMESPACES } from "./enclave-ops.ts";
import { equalBytes, type Hex, toHex } from "./hex.ts";
import { KEY_REF_PATTERN } from "./identity-proof.ts";
import { err, ok, type Result } from "./result.ts";

export const BACKUP_ENVELOPE_KIND = "svc-hsm/backup/v2" as const;
/** The kind of a signed (v3) envelope; the signature's preimage names it too. */
export const SIGNED_BACKUP_ENVELOPE_KIND = "svc-hsm/backup/v3" as const;
const BACKUP_SIGNATURE_LABEL = "svc-hsm/backup-signature/v1";
export const RESTORE_PACKAGE_KIND = "svc-hsm/restore-package/v1";
/** HPKE `info` of the recovery copy in a backup envelope. */
export const RECOVERY_HPKE_INFO = "svc-hsm/backup-recovery/v1";
/** HPKE `info` of a restore package (recovery copy re-encrypted to an enclave's transport key). */
export const TRANSPORT_HPKE_INFO = "svc-hsm/restore-transport/v1";
/** HPKE `info` of the recovery encryption key sealed to an enclave's transport key. */
export const RECOVERY_KEY_HPKE_INFO = "svc-hsm/recovery-key-transport/v1";
const SEALED_RECOVERY_KEY_KIND = "svc-hsm/sealed-recovery-key/v1";
export const X25519_KEY_BYTES = 32;
const AEAD_TAG_BYTES = 16;

const bytes = (length: number) => bytesSchema.refine((value) => value.length === length);
const textEncoder = new TextEncoder();

export const backupHeaderSchema = z.object({
  batch_id: z.string().min(1).max(128),
  env_id: z.string(),
  chain_id: z.number().int(),
  namespace: z.enum(KEY_NAMESPACES),
  created_at: z.string(),
  /** recoveryKeyFingerprint of the X25519 key the recovery copy is sealed to. */
  recovery_key_sha256: z.string().regex(/^0x[0-9a-f]{64}$/),
  keys: z
    .array(
      z.object({
        key_ref: z.string().regex(KEY_REF_PATTERN),
        public_key: bytes(65),
        address: z.string().regex(/^0x[0-9a-fA-F]{40}$/),
      }),
    )
    .min(1),
});
export type BackupHeader = z.infer<typeof backupHeaderSchema>;

/** An HPKE ciphertext: the encapsulated key and the AEAD ciphertext (tag included). */
export const hpkeBoxSchema = z.object({ enc: bytes(X25519_KEY_BYTES), ct: bytesSchema });
export type HpkeBox = z.infer<typeof hpkeBoxSchema>;

const unsignedEnvelopeSchema = z.object({
  v: z.literal(2),
  kind: z.literal(BACKUP_ENVELOPE_KIND),
  header: backupHeaderSchema,
  recovery: hpkeBoxSchema,
  /** The same secrets under the enclave's sealing key (AES-256-GCM), for verify_backup only. */
  sealed: bytesSchema,
});

const signedEnvelopeSchema = unsignedEnvelopeSchema.extend({
  v: z.literal(3),
  kind: z.literal(SIGNED_BACKUP_ENVELOPE_KIND),
  /** Ed25519 public key of the enclave's backup signer. */
  signer: bytes(32),
  /** Ed25519 signature by `signer` over backupSignaturePreimage of the rest of the envelope. */
  signature: bytes(64),
});

export const backupEnvelopeSchema = z.discriminatedUnion("v", [unsignedEnvelopeSchema, signedEnvelopeSchema]);
export type BackupEnvelope = z.infer<typeof backupEnvelopeSchema>;
export type SignedBackupEnvelope = z.infer<typeof signedEnvelopeSchema>;

/** What the backup signer signs: every field of a v3 envelope but the signature, labelled. */
export function backupSignaturePreimage(envelope: Omit<SignedBackupEnvelope, "signature">): Uint8Array {
  return encodeCanonicalCbor({
    label: BACKUP_SIGNATURE_LABEL,
    v: envelope.v,
    kind: envelope.kind,
    header: envelope.header,
    recovery: envelope.recovery,
    sealed: envelope.sealed,
    signer: envelope.signer,
  });
}

/** The Ed25519 public key of a backup signer's 32-byte seed. */
export function backupSignerPublicKey(seed: Uint8Array): Uint8Array {
  return ed25519.getPublicKey(seed);
}

/** Signs a v3 envelope's preimage with the backup signer's seed. */
export function signBackupEnvelope(seed: Uint8Array, preimage: Uint8Array): Uint8Array {
  return ed25519.sign(preimage, seed);
}

/**
 * The backup signers whose envelopes may be restored: one, or several where the folder holds
 * backups of more than one enclave of the node (an enclave a recovery replaced signed its own with
 * the backup signer of its own sealing key); and whether unsigned (v2) envelopes pass.
 */
export type BackupSignerPolicy = {
  expected: Uint8Array | readonly Uint8Array[] | null;
  acceptUnsigned: boolean;
};

/**
 * Whether a parsed envelope may be restored under `policy`: a v3 envelope signed by an expected
 * key, or a v2 (unsigned) one when the operator accepts those. `ok(true)` for an unsigned envelope
 * let through (the caller warns), `ok(false)` for a verified one; the error says why not.
 */
export function checkBackupSignature(
  envelope: BackupEnvelope,
  policy: BackupSignerPolicy,
): Result<boolean, string> {
  if (envelope.v === 2) {
    return policy.acceptUnsigned
      ? ok(true)
      : err(
          "unsigned envelope (v2, made before backups were signed): anyone holding the public recovery key can make one; restore it only with --accept-unsigned-backups",
        );
  }
  const expected =
    policy.expected === null
      ? []
      : policy.expected instanceof Uint8Array
        ? [policy.expected]
        : policy.expected;
  if (expected.length === 0)
    return err("signed envelope, but no --backup-signer to check it against was given");
  const { signature, ...rest } = envelope;
  const signer = expected.find((key) => equalBytes(envelope.signer, key));
  if (!signer) {
    return err(
      `signed by backup signer ${toHex(envelope.signer)}, not by the expected ${expected.map((key) => toHex(key)).join(" or ")}: ` +
        "planted, or made by another enclave. An enclave a recovery replaced signed its backups with its own " +
        "backup signer (backup_signer of its init record): name each such enclave's with another --backup-signer",
    );
  }
  let valid = false;
  try {
    valid = ed25519.verify(signature, backupSignaturePreimage(rest), signer);
  } catch {
    valid = false;
  }
  return valid ? ok(false) : err("the backup signature does not verify: the envelope was altered or forged");
}

export const restorePackageSchema = z.object({
  v: z.literal(1),
  kind: z.literal(RESTORE_PACKAGE_KIND),
  header: backupHeaderSchema,
  transport_public_key: bytes(X25519_KEY_BYTES),
  box: hpkeBoxSchema,
});
export type RestorePackage = z.infer<typeof restorePackageSchema>;

/** The plaintext both copies carry: the batch's private keys, in header order. */
export const backupSecretsSchema = z.array(
  z.object({ key_ref: z.string().regex(KEY_REF_PATTERN), private_key: bytes(32) }),
);
export type BackupSecrets = z.infer<typeof backupSecretsSchema>;

/** Thrown when an HPKE ciphertext does not open (wrong key, other header, corrupted bytes). */
export class HpkeOpenError extends Error {
  override readonly name = "HpkeOpenError";
}

const suite = new CipherSuite({
  kem: new DhkemX25519HkdfSha256(),
  kdf: new HkdfSha256(),
  aead: new Aes256Gcm(),
});

/** A transport key's private half as the HPKE library holds it in memory (a CryptoKey). */
export type TransportPrivateKey = Awaited<ReturnType<typeof suite.kem.generateKeyPair>>["privateKey"];

/** The associated data of the recovery copy and the sealing-key copy: the canonical header. */
export function headerAad(header: BackupHeader): Uint8Array {
  return encodeCanonicalCbor(header);
}

/** The associated data of a restore package: the header and the transport key it is sealed to. */
export function packageAad(header: BackupHeader, transportPublicKey: Uint8Array): Uint8Array {
  return encodeCanonicalCbor({ header, transport_public_key: transportPublicKey });
}

/**
 * The associated data of a sealed recovery key: the transport key it is sealed to and the public
 * half it must have (the recovery encryption key the receiving enclave sealed at init).
 */
export function recoveryKeyAad(transportPublicKey: Uint8Array, recoveryPublicKey: Uint8Array): Uint8Array {
  return encodeCanonicalCbor({
    kind: SEALED_RECOVERY_KEY_KIND,
    transport_public_key: transportPublicKey,
    recovery_encryption_key: recoveryPublicKey,
  });
}

/** SHA-256 of an X25519 public key, 0x-hex: how a header names the recovery key without holding it. */
export function recoveryKeyFingerprint(publicKey: Uint8Array): Hex {
  return toHex(sha256(publicKey));
}

/** The X25519 public key of a 32-byte private key (RFC 7748, as HPKE's DHKEM serialises it). */
export function x25519PublicKey(privateKey: Uint8Array): Uint8Array {
  return x25519.getPublicKey(privateKey);
}

/** A fresh X25519 private key (32 bytes) from the platform CSPRNG. */
export function randomX25519PrivateKey(): Uint8Array {
  return x25519.utils.randomPrivateKey();
}

/** True when `bytes` are the expected HPKE ciphertext length for a plaintext of `plaintextLength`. */
export function isWellFormedBox(box: HpkeBox, plaintextLength: number): boolean {
  return box.enc.length === X25519_KEY_BYTES && box.ct.length === plaintextLength + AEAD_TAG_BYTES;
}

/** Seals `plaintext` to an X25519 public key with HPKE base mode. */
export async function hpkeSeal(
  recipientPublicKey: Uint8Array,
  info: string,
  aad: Uint8Array,
  plaintext: Uint8Array,
): Promise<HpkeBox> {
  const publicKey = await suite.kem.deserializePublicKey(copyBuffer(recipientPublicKey));
  const sealed = await suite.seal(
    { recipientPublicKey: publicKey, info: copyBuffer(textEncoder.encode(info)) },
    copyBuffer(plaintext),
    copyBuffer(aad),
  );
  return { enc: new Uint8Array(sealed.enc), ct: new Uint8Array(sealed.ct) };
}

/**
 * Opens an HPKE box with a recipient private key (raw 32 bytes, or a CryptoKey held in memory);
 * throws HpkeOpenError for any failure, never saying which check failed.
 */
export async function hpkeOpen(
  recipientPrivateKey: Uint8Array | TransportPrivateKey,
  info: string,
  aad: Uint8Array,
  box: HpkeBox,
): Promise<Uint8Array> {
  try {
    const recipientKey =
      recipientPrivateKey instanceof Uint8Array
        ? await suite.kem.deserializePrivateKey(copyBuffer(recipientPrivateKey))
        : recipientPrivateKey;
    const opened = await suite.open(
      { recipientKey, enc: copyBuffer(box.enc), info: copyBuffer(textEncoder.encode(info)) },
      copyBuffer(box.ct),
      copyBuffer(aad),
    );
    return new Uint8Array(opened);
  } catch {
    // The library's errors carry no key material, but the cause is dropped all the same: a
    // refusal says only that the box did not open.
    throw new HpkeOpenError("HPKE ciphertext does not open");
  }
}

/**
 * A raw X25519 private key (32 bytes) as the HPKE library holds it in memory, for an enclave that
 * keeps the recovery encryption key loaded for a while without keeping its bytes around.
 */
export async function importX25519PrivateKey(privateKey: Uint8Array): Promise<TransportPrivateKey> {
  return suite.kem.deserializePrivateKey(copyBuffer(privateKey));
}

/** A fresh in-memory X25519 key pair for a transport key; the private half is never serialised. */
export async function generateTransportKeyPair(): Promise<{
  privateKey: TransportPrivateKey;
  publicKey: Uint8Array;
}> {
  const pair = await suite.kem.generateKeyPair();
  return {
    privateKey: pair.privateKey,
    publicKey: new Uint8Array(await suite.kem.serializePublicKey(pair.publicKey)),
  };
}

/** A parse that failed says why, for the operator. */
export type ParseResult<T> = Result<T, string>;

/** Decodes and parses a backup envelope (v3 or v2); a v1 envelope is named as such. */
export function parseBackupEnvelope(raw: Uint8Array): ParseResult<BackupEnvelope> {
  let decoded: unknown;
  try {
    decoded = decodeCbor(raw);
  } catch {
    return err("not a backup envelope (does not decode)");
  }
  const parsed = backupEnvelopeSchema.safeParse(decoded);
  if (parsed.success) return ok(parsed.data);
  if (typeof decoded === "object" && decoded !== null && (decoded as { v?: unknown }).v === 1) {
    return err(
      "a v1 envelope (sealing key only, made before the recovery key existed): it has no recovery copy",
    );
  }
  return err("not a backup envelope (unexpected shape)");
}

/** Decodes and parses a restore package. */
export function parseRestorePackage(raw: Uint8Array): ParseResult<RestorePackage> {
  let decoded: unknown;
  try {
    decoded = decodeCbor(raw);
  } catch {
    return err("not a restore package");
  }
  const parsed = restorePackageSchema.safeParse(decoded);
  return parsed.success ? ok(parsed.data) : err("not a restore package");
}

/** Decodes the secrets plaintext; null when it does not parse or does not match the header's refs. */
export function parseSecrets(plaintext: Uint8Array, header: BackupHeader): BackupSecrets | null {
  let decoded: unknown;
  try {
    decoded = decodeCbor(plaintext);
  } catch {
    return null;
  }
  const parsed = backupSecretsSchema.safeParse(decoded);
  if (!parsed.success || parsed.data.length !== header.keys.length) return null;
  const sameRefs = parsed.data.every((secret, index) => secret.key_ref === header.keys[index]!.key_ref);
  return sameRefs ? parsed.data : null;
}

// WebCrypto wants an ArrayBuffer; a Buffer from cbor-x may be a view into a larger pool.
function copyBuffer(view: Uint8Array): ArrayBuffer {
  const copy = new Uint8Array(view.length);
  copy.set(view);
  return copy.buffer;
}
