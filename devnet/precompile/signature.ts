/**
 * Signer recovery with the checks USDC's ECRecover library makes before calling ecrecover:
 * EIP-2 low S, v of 27 or 28, and a signature that recovers at all.
 */
import { bytesToBigInt } from "@ethereumjs/util";
import { secp256k1 } from "@noble/curves/secp256k1";
import { keccak_256 } from "@noble/hashes/sha3";
import { err, ok, type Result } from "../result.ts";

const HALF_ORDER = secp256k1.CURVE.n >> 1n;

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

/** The 20-byte address that signed `digest`. */
export function recoverSigner(
  digest: Uint8Array,
  { v, r, s }: SignatureParts,
): Result<Uint8Array, SignatureFailure> {
  if (s > HALF_ORDER) return err("invalid_s");
  if (v !== 27 && v !== 28) return err("invalid_v");
  try {
    const publicKey = new secp256k1.Signature(r, s)
      .addRecoveryBit(v - 27)
      .recoverPublicKey(digest)
      .toBytes(false);
    return ok(keccak_256(publicKey.subarray(1)).subarray(12));
  } catch {
    // r or s out of range (zero included), or no curve point for r: ecrecover returns address(0).
    return err("invalid_signature");
  }
}
