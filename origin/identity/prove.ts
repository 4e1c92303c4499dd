import { randomBytes } from "node:crypto";
import type { Hex } from "../../shared/hex.ts";
import { verifyIdentityProof } from "../../shared/identity-proof.ts";
import type { SignerClient, SignerFailure, SignerFailureClass } from "../signer/types.ts";

export type SweepClass = "destructive" | SignerFailureClass;

/**
 * What one proof attempt concluded: verified, or a finding's class
 * (docs/operations.md#what-a-finding-means).
 */
export type ProofOutcome =
  | { verified: true }
  | { verified: false; class: SweepClass; code: string; detail: string };

/** The two ops a proof asks the enclave; the sweep and the canary see no more of the signer. */
export type IdentitySigner = Pick<SignerClient, "publicIdentity" | "proveIdentity">;

export type IdentityUnderProof = { keyRef: string; assignedWallet: `0x${string}` };

export type ProveParams = { chainId: number; envId: string };

/**
 * Asks the enclave for the key's public identity and a proof over a fresh nonce, and checks both
 * against what we stored and what we are configured for, never against what the enclave says.
 * Only a mismatch or a failed proof is `destructive`; everything else leaves the wallet intact.
 */
export async function proveIdentity(
  signer: IdentitySigner,
  identity: IdentityUnderProof,
  params: ProveParams,
): Promise<ProofOutcome> {
  const publicIdentity = await signer.publicIdentity({ keyRef: identity.keyRef });
  if (!publicIdentity.ok) return fromSignerFailure(publicIdentity.error);
  const info = publicIdentity.value;
  if (info.keyRef !== identity.keyRef) {
    return destructive("key_ref_mismatch", "the enclave answered for another key");
  }
  if (info.address.toLowerCase() !== identity.assignedWallet.toLowerCase()) {
    return destructive("wallet_mismatch", "the key's address is not the assigned wallet");
  }

  const nonce = `0x${randomBytes(32).toString("hex")}` as Hex;
  const proof = await signer.proveIdentity({ keyRef: identity.keyRef, verifierNonce: nonce });
  if (!proof.ok) return fromSignerFailure(proof.error);
  const verdict = verifyIdentityProof({
    chainId: params.chainId,
    envId: params.envId,
    keyRef: identity.keyRef,
    storedWallet: identity.assignedWallet,
    verifierNonce: nonce,
    publicKey: proof.value.publicKey,
    address: proof.value.address,
    signature: proof.value.signature,
  });
  if (!verdict.ok) {
    // A proof made for another chain or environment fails here too: fail closed
    // (docs/operations.md#switching-a-node-to-live-signing).
    return destructive(verdict.error === "signature_invalid" ? "proof_failed" : verdict.error, verdict.error);
  }
  if (proof.value.publicKey.toLowerCase() !== info.publicKey.toLowerCase()) {
    return destructive("public_key_mismatch", "the proof's key differs from the public identity");
  }
  return { verified: true };
}

function destructive(code: string, detail: string): ProofOutcome {
  return { verified: false, class: "destructive", code, detail };
}

/**
 * The enclave answers `key_purpose_mismatch` when it holds no agent-transfer key under the stored
 * ref (also its answer to "key not found": no oracle, docs/security.md). For the sweep that is the
 * spec's "key-ref mismatch": the enclave no longer holds the key behind the wallet, so it is
 * destructive.
 */
function fromSignerFailure(error: SignerFailure): ProofOutcome {
  if (error.code === "key_purpose_mismatch") {
    return destructive("key_ref_mismatch", "the enclave holds no agent key under the stored key ref");
  }
  return { verified: false, class: error.class, code: error.code, detail: error.reason };
}
