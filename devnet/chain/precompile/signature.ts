/**
 * Signer recovery with the checks USDC's ECRecover library makes before calling ecrecover:
 * EIP-2 low S, v of 27 or 28, and a signature that recovers at all. The recovery itself is
 * @ethereumjs/util's ecrecover (on libsecp256k1 where it loads), or the chain's drop-in for it
 * that serves keys prefetched on worker threads (signature-recovery.ts).
 */
import { bigIntToBytes, bytesToBigInt, SECP256K1_ORDER_DIV_2, setLengthLeft } from "@ethereumjs/util";
import { keccak256 } from "../../../shared/keccak.ts";
import { err, ok, type Result } from "../../../shared/result.ts";
import { type Ecrecover, type RecoveryInput, ecrecover as recoverPublicKey } from "../signature-recovery.ts";

export type SignatureFailure = "invalid_signature_length" | "invalid_s" | "invalid_v" | "invalid_signature";

export type SignatureParts = { v: number; r: bigint; s: bigint };

/** Splits a 65-byte r ‖ s ‖ v signature, the `bytes signature` variant's argument. */
export function splitSignature(signature: Uint8Array): Result<SignatureParts, SignatureFailure> {
  if (signature.length !== 65) return err("invalid_signature_length");
  return ok({
    r: bytesToBigInt(signature.subarray(0, 32)),
    s: bytesToBigInt(signature.subarray(32, 64)),
    v: signature[64] ?? 0,
  });
}

/**
 * What recoverSigner hands to ecrecover for these parts, or undefined when its checks refuse
 * them first. A worker that recovers this input ahead serves the precompile's exact request.
 */
export function signerRecoveryInput(
  digest: Uint8Array,
  { v, r, s }: SignatureParts,
): RecoveryInput | undefined {
  if (s > SECP256K1_ORDER_DIV_2) return undefined;
  if (v !== 27 && v !== 28) return undefined;
  // Words of the calldata: at most 32 bytes each. No chain id: v - 27 is the recovery bit.
  return { hash: digest, v: BigInt(v), r: word(r), s: word(s), chainId: undefined };
}

/** The 20-byte address that signed `digest`. */
export function recoverSigner(
  digest: Uint8Array,
  parts: SignatureParts,
  ecrecover: Ecrecover = recoverPublicKey,
): Result<Uint8Array, SignatureFailure> {
  if (parts.s > SECP256K1_ORDER_DIV_2) return err("invalid_s");
  const input = signerRecoveryInput(digest, parts);
  if (input === undefined) return err("invalid_v");
  try {
    const publicKey = ecrecover(input.hash, input.v, input.r, input.s, input.chainId);
    return ok(keccak256(publicKey).subarray(12));
  } catch {
    // r or s out of range (zero included), or no curve point for r: ecrecover returns address(0).
    return err("invalid_signature");
  }
}

function word(value: bigint): Uint8Array {
  return setLengthLeft(bigIntToBytes(value), 32);
}
