/**
 * What a script may check of a backup envelope without opening it: the plaintext header names
 * the batch, the env and chain, and the fingerprint of the recovery key its recovery copy is
 * sealed to. Drills and recoveries refuse a wrong envelope here by name, before any enclave is
 * asked; opening the recovery copy is left to the enclave (or, on the air-gapped path, to
 * reencrypt-envelope.ts). The refusals never carry key material.
 */
import {
  type BackupEnvelope,
  type BackupHeader,
  parseBackupEnvelope,
  recoveryKeyFingerprint,
} from "../../shared/recovery-envelope.ts";
import { err, ok, type Result } from "../../shared/result.ts";

export type CheckEnvelopeHeaderParams = {
  envelope: Uint8Array;
  /** The public half of the recovery encryption key that will open the recovery copy. */
  recoveryPublicKey: Uint8Array;
  /** The enclave the keys are for: an envelope of another env or chain is refused. */
  expect: { envId: string; chainId: number; batchId?: string };
};

export type EnvelopeRefusalCode =
  | "not_an_envelope"
  | "other_environment"
  | "other_batch"
  | "wrong_recovery_key";

export type EnvelopeRefusal = { code: EnvelopeRefusalCode; reason: string };

export type CheckedEnvelope = { header: BackupHeader; envelope: BackupEnvelope };

export type CheckEnvelopeHeaderResult = Result<CheckedEnvelope, EnvelopeRefusal>;

/** Parses the envelope and checks its header against `expect` and the recovery key's fingerprint. */
export function checkEnvelopeHeader(params: CheckEnvelopeHeaderParams): CheckEnvelopeHeaderResult {
  const parsed = parseBackupEnvelope(params.envelope);
  if (!parsed.ok) return err({ code: "not_an_envelope", reason: parsed.error });
  const { header } = parsed.value;
  if (header.env_id !== params.expect.envId || header.chain_id !== params.expect.chainId) {
    return err({
      code: "other_environment",
      reason: `the envelope belongs to env ${header.env_id} on chain ${header.chain_id}, not to env ${params.expect.envId} on chain ${params.expect.chainId}`,
    });
  }
  if (params.expect.batchId !== undefined && header.batch_id !== params.expect.batchId) {
    return err({
      code: "other_batch",
      reason: `the envelope holds batch ${header.batch_id}, not ${params.expect.batchId}`,
    });
  }
  const given = recoveryKeyFingerprint(params.recoveryPublicKey);
  if (given !== header.recovery_key_sha256) {
    return err({
      code: "wrong_recovery_key",
      reason: `wrong recovery key: the envelope is sealed to the recovery key with fingerprint ${header.recovery_key_sha256}, the given key's fingerprint is ${given}`,
    });
  }
  return ok({ header, envelope: parsed.value });
}
