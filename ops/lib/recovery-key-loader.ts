/**
 * Hands the recovery encryption key to an enclave for a drill or a recovery, so that the enclave
 * opens the backup envelopes' recovery copies itself (restore_backup of the envelope as it is on
 * disk) and no wallet private key is ever decrypted in the script's process. The script asks the
 * enclave for a fresh transport key, seals the recovery key to it with HPKE (bound to the
 * recovery public key the enclave sealed at init) and sends only that ciphertext with
 * load_recovery_key, under a recovery capability. The enclave checks the key's public half and
 * holds it in memory only, for an hour at most.
 */
import type { CapabilityProvider, SignerClient, SignerFailure } from "../../origin/signer/types.ts";
import { equalBytes, fromHex, toHex } from "../../shared/hex.ts";
import {
  hpkeSeal,
  RECOVERY_KEY_HPKE_INFO,
  recoveryKeyAad,
  recoveryKeyFingerprint,
  x25519PublicKey,
} from "../../shared/recovery-envelope.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { enclaveUnreachable, signerFailureText } from "./enclave-unreachable.ts";

export type LoadRecoveryKeyIntoParams = {
  signer: Pick<SignerClient, "newTransportKey" | "loadRecoveryKey">;
  /** The recovery encryption private key (X25519, 32 bytes), read from the operator's key file. */
  recoveryEncryptionKey: Uint8Array;
  /** The recovery encryption public key the enclave sealed at init (get_sealed_identity). */
  recoveryPublicKey: Uint8Array;
  /** Mints the recovery-tier capability of load_recovery_key. */
  authorize: CapabilityProvider;
};

/**
 * Until when the enclave holds the key, or why it does not: `unreachable` when the enclave never
 * answered (enclave-unreachable.ts), rather than refused.
 */
export type LoadRecoveryKeyIntoResult = Result<
  { expiresAt: string },
  { message: string; unreachable: boolean }
>;

/** Loads the recovery encryption key into the enclave behind `signer`; see the module comment. */
export async function loadRecoveryKeyInto(
  params: LoadRecoveryKeyIntoParams,
): Promise<LoadRecoveryKeyIntoResult> {
  const given = x25519PublicKey(params.recoveryEncryptionKey);
  if (!equalBytes(given, params.recoveryPublicKey)) {
    // The enclave would refuse it too; saying so here names both fingerprints.
    return err({
      message: `wrong recovery key: the enclave's recovery key has fingerprint ${recoveryKeyFingerprint(params.recoveryPublicKey)}, the given key's fingerprint is ${recoveryKeyFingerprint(given)}`,
      unreachable: false,
    });
  }
  const offered = await params.signer.newTransportKey();
  if (!offered.ok) return signerFailure("new_transport_key", offered.error);
  const transportPublicKey = fromHex(offered.value.transportPublicKey);
  const box = await hpkeSeal(
    transportPublicKey,
    RECOVERY_KEY_HPKE_INFO,
    recoveryKeyAad(transportPublicKey, params.recoveryPublicKey),
    params.recoveryEncryptionKey,
  );
  const loaded = await params.signer.loadRecoveryKey(
    { transportPublicKey: offered.value.transportPublicKey, enc: toHex(box.enc), ct: toHex(box.ct) },
    params.authorize,
  );
  if (!loaded.ok) return signerFailure("load_recovery_key", loaded.error);
  return ok({ expiresAt: loaded.value.expiresAt });
}

function signerFailure(op: string, failure: SignerFailure): LoadRecoveryKeyIntoResult {
  return err({ message: signerFailureText(op, failure), unreachable: enclaveUnreachable(failure) });
}
