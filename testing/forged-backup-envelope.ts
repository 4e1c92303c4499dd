/**
 * Backup envelopes an attacker makes (ops/recover-forged-backup.int.test.ts, the restore drill's
 * test), and the unsigned (v2) copy of a genuine one, as the enclave exported before envelopes
 * were signed.
 */
import { randomBytes } from "node:crypto";
import { materialFromPrivateKey } from "../enclave/keystore.ts";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import {
  BACKUP_ENVELOPE_KIND,
  type BackupHeader,
  backupSignaturePreimage,
  backupSignerPublicKey,
  headerAad,
  hpkeSeal,
  RECOVERY_HPKE_INFO,
  recoveryKeyFingerprint,
  SIGNED_BACKUP_ENVELOPE_KIND,
  signBackupEnvelope,
} from "../shared/recovery-envelope.ts";

/**
 * What an attacker on the origin host (where the backup folder lives) can make from public values
 * alone: the env id, the chain and the recovery encryption public key. HPKE base mode seals to a
 * public key without authenticating the sender, so the recovery copy opens as well as a genuine
 * one. The envelope claims `keyRef` (an agent's, read from the database) with a key the attacker
 * knows; `signWith` signs it as a v3 envelope with the attacker's own Ed25519 key.
 */
export async function forgeEnvelope(params: {
  envId: string;
  recoveryPublicKey: Uint8Array;
  keyRef: string;
  /** The batch it claims to be ("planted" unless named: a drill looks one up by id). */
  batchId?: string;
  signWith?: Uint8Array;
}): Promise<{ envelope: Uint8Array; address: string; publicKey: string }> {
  const attackerKey = materialFromPrivateKey(new Uint8Array(randomBytes(32)), params.keyRef);
  const header: BackupHeader = {
    batch_id: params.batchId ?? "planted",
    env_id: params.envId,
    chain_id: CHAIN_ID,
    namespace: "agent-transfer",
    created_at: new Date().toISOString(),
    recovery_key_sha256: recoveryKeyFingerprint(params.recoveryPublicKey),
    keys: [{ key_ref: params.keyRef, public_key: attackerKey.publicKey, address: attackerKey.address }],
  };
  const plaintext = encodeCbor([{ key_ref: params.keyRef, private_key: attackerKey.privateKey }]);
  const recovery = await hpkeSeal(params.recoveryPublicKey, RECOVERY_HPKE_INFO, headerAad(header), plaintext);
  // The sealing-key copy only verify_backup opens: a recovery never reads it.
  const sealed = new Uint8Array(randomBytes(plaintext.length + 29));
  if (!params.signWith) {
    return {
      envelope: encodeCbor({ v: 2, kind: BACKUP_ENVELOPE_KIND, header, recovery, sealed }),
      address: attackerKey.address,
      publicKey: attackerKey.publicKeyHex,
    };
  }
  const unsigned = {
    v: 3 as const,
    kind: SIGNED_BACKUP_ENVELOPE_KIND,
    header,
    recovery,
    sealed,
    signer: backupSignerPublicKey(params.signWith),
  };
  const signature = signBackupEnvelope(params.signWith, backupSignaturePreimage(unsigned));
  return {
    envelope: encodeCbor({ ...unsigned, signature }),
    address: attackerKey.address,
    publicKey: attackerKey.publicKeyHex,
  };
}

/** A genuine v3 envelope as the v2 the enclave made before backups were signed: no signer, no signature. */
export function unsignedCopy(envelope: Uint8Array): Uint8Array {
  const {
    v: _v,
    kind: _kind,
    signer: _signer,
    signature: _signature,
    ...rest
  } = decodeCbor(envelope) as Record<string, unknown>;
  return encodeCbor({ v: 2, kind: BACKUP_ENVELOPE_KIND, ...rest });
}
