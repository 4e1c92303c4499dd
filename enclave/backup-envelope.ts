/**
 * Encrypted backup envelopes of a key batch (SPEC "Transfer-key pool", DESIGN §5 export/verify/
 * restore). The envelope is a CBOR map with a plaintext header (batch id, env id, chain id,
 * namespace, public keys and addresses) and the private keys sealed with AES-256-GCM under a key
 * derived from the sealing key by HKDF; the canonical CBOR of the header is the associated data,
 * so a header cannot be swapped onto another batch's ciphertext.
 */
import { createHash } from "node:crypto";
import { z } from "zod";
import { encodeCanonicalCbor } from "../shared/canonical-cbor.ts";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import { bytesSchema } from "../shared/enclave-ops.ts";
import { equalBytes, type Hex, toHex } from "../shared/hex.ts";
import { KEY_REF_PATTERN } from "../shared/identity-proof.ts";
import type { EnclaveContext } from "./context.ts";
import { type KeyEntry, type KeyMaterial, materialFromPrivateKey } from "./keystore.ts";
import { type OpOutcome, refuse, succeed } from "./outcome.ts";
import { deriveBackupKey, SEAL_LABEL, SealError, seal, unseal } from "./sealing.ts";

const ENVELOPE_KIND = "svc-hsm/backup/v1";
const bytes = (length: number) => bytesSchema.refine((value) => value.length === length);

const headerSchema = z.object({
  batch_id: z.string().min(1),
  env_id: z.string(),
  chain_id: z.number().int(),
  namespace: z.string(),
  created_at: z.string(),
  keys: z.array(
    z.object({ key_ref: z.string().regex(KEY_REF_PATTERN), public_key: bytes(65), address: z.string() }),
  ),
});
type BackupHeader = z.infer<typeof headerSchema>;

const envelopeSchema = z.object({
  v: z.literal(1),
  kind: z.literal(ENVELOPE_KIND),
  header: headerSchema,
  sealed: bytesSchema,
});

const secretsSchema = z.array(
  z.object({ key_ref: z.string().regex(KEY_REF_PATTERN), private_key: bytes(32) }),
);

export type BuiltEnvelope = { envelope: Uint8Array; sha256: Hex };

/** Seals `keys` of one batch into an envelope. */
export function buildBackupEnvelope(
  ctx: EnclaveContext,
  batch: { batchId: string; namespace: string; keys: KeyEntry[] },
): BuiltEnvelope {
  const header: BackupHeader = {
    batch_id: batch.batchId,
    env_id: ctx.config.env_id,
    chain_id: ctx.config.chain_id,
    namespace: batch.namespace,
    created_at: ctx.now().toISOString(),
    keys: batch.keys.map((key) => ({ key_ref: key.keyRef, public_key: key.publicKey, address: key.address })),
  };
  const secrets = batch.keys.map((key) => ({ key_ref: key.keyRef, private_key: key.privateKey }));
  const backupKey = deriveBackupKey(ctx.sealingKey, ctx.config.env_id);
  const sealed = seal(backupKey, SEAL_LABEL.backup, encodeCbor(secrets), encodeCanonicalCbor(header));
  const envelope = encodeCbor({ v: 1, kind: ENVELOPE_KIND, header, sealed });
  return { envelope, sha256: toHex(createHash("sha256").update(envelope).digest()) };
}

export type OpenedEnvelope = {
  batchId: string;
  namespace: string;
  keys: KeyMaterial[];
};

/**
 * Decrypts an envelope and checks that every private key reproduces the public key and address
 * of its header entry. Refusals: `malformed` for something that is not an envelope, `seal_failed`
 * for another environment, a failed authentication or a key that does not reproduce.
 */
export function openBackupEnvelope(ctx: EnclaveContext, envelope: Uint8Array): OpOutcome<OpenedEnvelope> {
  let decoded: unknown;
  try {
    decoded = decodeCbor(envelope);
  } catch {
    return refuse("malformed", "not a backup envelope");
  }
  const parsed = envelopeSchema.safeParse(decoded);
  if (!parsed.success) return refuse("malformed", "not a backup envelope");
  const { header, sealed } = parsed.data;
  if (header.env_id !== ctx.config.env_id || header.chain_id !== ctx.config.chain_id) {
    return refuse("seal_failed", "envelope belongs to another environment");
  }
  let secrets: z.infer<typeof secretsSchema>;
  try {
    const backupKey = deriveBackupKey(ctx.sealingKey, ctx.config.env_id);
    const plaintext = unseal(backupKey, SEAL_LABEL.backup, sealed, encodeCanonicalCbor(header));
    secrets = secretsSchema.parse(decodeCbor(plaintext));
  } catch (error) {
    if (error instanceof SealError || error instanceof z.ZodError) {
      return refuse("seal_failed", "envelope does not authenticate");
    }
    throw error;
  }
  if (secrets.length !== header.keys.length || secrets.length === 0) {
    return refuse("seal_failed", "envelope keys do not match its header");
  }
  const keys: KeyMaterial[] = [];
  for (const [index, secret] of secrets.entries()) {
    const expected = header.keys[index]!;
    const material = materialFromPrivateKey(secret.private_key, secret.key_ref);
    const reproduces =
      secret.key_ref === expected.key_ref &&
      equalBytes(material.publicKey, expected.public_key) &&
      material.address.toLowerCase() === expected.address.toLowerCase();
    if (!reproduces) return refuse("seal_failed", "envelope keys do not reproduce their public keys");
    keys.push(material);
  }
  return succeed({ batchId: header.batch_id, namespace: header.namespace, keys });
}
