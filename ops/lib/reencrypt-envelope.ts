/**
 * The offline re-encryption step of the air-gapped recovery path (ops/recovery-reencrypt.ts,
 * docs/operations.md "Disaster recovery"): opens a backup envelope's recovery copy with the recovery
 * encryption key and seals the same keys to the transport key a (new) enclave offered, as a
 * restore package. This is the one place outside an enclave where the plaintext keys exist, in
 * this process's memory only, on a machine that never reaches the enclave: nothing here writes,
 * logs or returns them, and every refusal says what is wrong without any key material. Drills and
 * `recover --backup-dir` never come here: they have the enclave open the envelopes itself
 * (recovery-key-loader.ts), and ops/recovery-paths.test.ts checks they do not import this.
 */
import { encodeCbor } from "../../shared/cbor-frame.ts";
import { equalBytes } from "../../shared/hex.ts";
import {
  type BackupHeader,
  HpkeOpenError,
  headerAad,
  hpkeOpen,
  hpkeSeal,
  packageAad,
  parseSecrets,
  RECOVERY_HPKE_INFO,
  RESTORE_PACKAGE_KIND,
  TRANSPORT_HPKE_INFO,
  x25519PublicKey,
} from "../../shared/recovery-envelope.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { addressOfPublicKey, publicKeyOf } from "../../shared/secp256k1.ts";
import { checkEnvelopeHeader, type EnvelopeRefusalCode } from "./envelope-header.ts";

export type OpenEnvelopeParams = {
  envelope: Uint8Array;
  recoveryPrivateKey: Uint8Array;
  /** The enclave the keys are for: an envelope of another env or chain is refused. */
  expect: { envId: string; chainId: number; batchId?: string };
};

export type ReencryptParams = OpenEnvelopeParams & { transportPublicKey: Uint8Array };

export type ReencryptRefusalCode = EnvelopeRefusalCode | "does_not_open" | "keys_do_not_reproduce";

export type ReencryptRefusal = { code: ReencryptRefusalCode; reason: string };

/** An opened recovery copy: keep it in memory only, and seal it with sealForTransport. */
export type OpenedEnvelope = { header: BackupHeader; plaintext: Uint8Array };

export type OpenRecoveryCopyResult = Result<OpenedEnvelope, ReencryptRefusal>;

/** A restore package and the header of the envelope it was made from. */
export type ReencryptedPackage = { package: Uint8Array; header: BackupHeader };

export type ReencryptResult = Result<ReencryptedPackage, ReencryptRefusal>;

/** Re-encrypts one envelope's keys to a transport key; see the module comment. */
export async function reencryptForTransport(params: ReencryptParams): Promise<ReencryptResult> {
  const opened = await openRecoveryCopy(params);
  if (!opened.ok) return opened;
  return ok({
    package: await sealForTransport(opened.value, params.transportPublicKey),
    header: opened.value.header,
  });
}

/**
 * Opens an envelope's recovery copy and checks that every key reproduces its header entry. The
 * refusals name what is wrong (another env, another batch, another recovery key, a copy that
 * does not open) and never carry key material.
 */
export async function openRecoveryCopy(params: OpenEnvelopeParams): Promise<OpenRecoveryCopyResult> {
  const checked = checkEnvelopeHeader({
    envelope: params.envelope,
    recoveryPublicKey: x25519PublicKey(params.recoveryPrivateKey),
    expect: params.expect,
  });
  if (!checked.ok) return checked;
  const { header, recovery } = checked.value.envelope;
  let plaintext: Uint8Array;
  try {
    plaintext = await hpkeOpen(params.recoveryPrivateKey, RECOVERY_HPKE_INFO, headerAad(header), recovery);
  } catch (error) {
    if (!(error instanceof HpkeOpenError)) throw error;
    return err({
      code: "does_not_open",
      reason:
        "the recovery copy does not open with this key: the envelope is corrupted or its header was altered",
    });
  }
  const secrets = parseSecrets(plaintext, header);
  const reproduces =
    secrets?.every((secret, index) => {
      const expected = header.keys[index]!;
      const publicKey = publicKeyOf(secret.private_key);
      return (
        equalBytes(publicKey, expected.public_key) &&
        addressOfPublicKey(publicKey).toLowerCase() === expected.address.toLowerCase()
      );
    }) ?? false;
  if (!reproduces) {
    return err({
      code: "keys_do_not_reproduce",
      reason: "the recovery copy's keys do not reproduce the public keys of its header",
    });
  }
  return ok({ header, plaintext });
}

/** Seals an opened recovery copy to a transport key as a restore package. */
export async function sealForTransport(
  opened: OpenedEnvelope,
  transportPublicKey: Uint8Array,
): Promise<Uint8Array> {
  const box = await hpkeSeal(
    transportPublicKey,
    TRANSPORT_HPKE_INFO,
    packageAad(opened.header, transportPublicKey),
    opened.plaintext,
  );
  return encodeCbor({
    v: 1,
    kind: RESTORE_PACKAGE_KIND,
    header: opened.header,
    transport_public_key: transportPublicKey,
    box,
  });
}
