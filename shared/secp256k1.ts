/**
 * secp256k1 helpers shared by the enclave (signing) and the verifiers (recovery): Ethereum-style
 * 65-byte signatures r ‖ s ‖ v (v = 27 + recovery id), EIP-2 low-S enforced both ways, and
 * address derivation from an uncompressed SEC1 public key. Signing, recovery and public keys go
 * through libsecp256k1 where its binding loads (libsecp256k1.ts: Node), else @noble/curves: same
 * bytes either way. Runtime-neutral: no `node:` imports.
 */
import { secp256k1 } from "@noble/curves/secp256k1";
import type { Address } from "viem";
import { checksumAddress } from "./address.ts";
import { fromHex, type Hex, toHex } from "./hex.ts";
import { keccak256 } from "./keccak.ts";
import { libsecp256k1 } from "./libsecp256k1.ts";

const HALF_ORDER = secp256k1.CURVE.n >> 1n;

export type RecoverableSignature = { signature: Hex; r: bigint; s: bigint; yParity: 0 | 1 };

/** Signs a 32-byte digest; noble's RFC 6979 signing normalises to low-S (EIP-2). */
export function signDigest(digest: Uint8Array, privateKey: Uint8Array): RecoverableSignature {
  if (libsecp256k1) {
    const { signature, recid } = libsecp256k1.ecdsaSign(digest, privateKey);
    const bytes = new Uint8Array(65);
    bytes.set(signature, 0);
    bytes[64] = 27 + recid;
    return {
      signature: toHex(bytes),
      r: bytesToBigInt(signature.subarray(0, 32)),
      s: bytesToBigInt(signature.subarray(32, 64)),
      yParity: recid === 1 ? 1 : 0,
    };
  }
  const sig = secp256k1.sign(digest, privateKey, { lowS: true });
  const bytes = new Uint8Array(65);
  bytes.set(sig.toCompactRawBytes(), 0);
  bytes[64] = 27 + sig.recovery;
  return { signature: toHex(bytes), r: sig.r, s: sig.s, yParity: sig.recovery === 1 ? 1 : 0 };
}

/**
 * Recovers the uncompressed public key that produced `signature` over `digest`, or null when the
 * signature is not 65 bytes, has a high S (EIP-2), a bad v, or does not recover.
 */
export function recoverPublicKey(digest: Uint8Array, signature: string): Uint8Array | null {
  try {
    const bytes = fromHex(signature);
    if (bytes.length !== 65) return null;
    const v = bytes[64]!;
    const recovery = v >= 27 ? v - 27 : v;
    if (recovery !== 0 && recovery !== 1) return null;
    if (bytesToBigInt(bytes.subarray(32, 64)) > HALF_ORDER) return null;
    if (libsecp256k1) return libsecp256k1.ecdsaRecover(bytes.subarray(0, 64), recovery, digest, false);
    const sig = secp256k1.Signature.fromCompact(bytes.subarray(0, 64)).addRecoveryBit(recovery);
    return sig.recoverPublicKey(digest).toRawBytes(false);
  } catch {
    return null;
  }
}

/** True when the S of a 65-byte r ‖ s ‖ v signature is in the lower half of the order (EIP-2). */
export function hasLowS(signature: Uint8Array): boolean {
  return signature.length === 65 && bytesToBigInt(signature.subarray(32, 64)) <= HALF_ORDER;
}

/** True when `publicKey` is a 65-byte uncompressed SEC1 point on secp256k1. */
export function isUncompressedPublicKey(publicKey: Uint8Array): boolean {
  if (publicKey.length !== 65 || publicKey[0] !== 0x04) return false;
  try {
    secp256k1.ProjectivePoint.fromHex(publicKey).assertValidity();
    return true;
  } catch {
    return false;
  }
}

function bytesToBigInt(bytes: Uint8Array): bigint {
  return BigInt(toHex(bytes));
}

/** EIP-55 address of an uncompressed public key: last 20 bytes of keccak256(x ‖ y). */
export function addressOfPublicKey(publicKey: Uint8Array): Address {
  return checksumAddress(toHex(keccak256(publicKey.subarray(1)).subarray(12)));
}

/** Uncompressed (65-byte) public key of a private key. */
export function publicKeyOf(privateKey: Uint8Array): Uint8Array {
  if (libsecp256k1) return libsecp256k1.publicKeyCreate(privateKey, false);
  return secp256k1.getPublicKey(privateKey, false);
}

/** A fresh random private key from the platform CSPRNG. */
export function randomPrivateKey(): Uint8Array {
  return secp256k1.utils.randomPrivateKey();
}

/** The most getRandomValues fills in one call (WebCrypto's limit). */
const RANDOM_VALUES_MAX_BYTES = 65_536;

/**
 * `count` fresh private keys from the platform CSPRNG, each 32 random bytes in [1, n): a draw
 * outside (probability about 2^-128) is drawn again, so every valid key is equally likely. The
 * bytes of many keys come from one call (a call costs about 10 µs on the machines we measure, as
 * much as deriving a public key with libsecp256k1); each key is a copy of its own.
 */
export function randomPrivateKeys(count: number): Uint8Array[] {
  const keys: Uint8Array[] = [];
  while (keys.length < count) {
    const draw = new Uint8Array(Math.min((count - keys.length) * 32, RANDOM_VALUES_MAX_BYTES));
    globalThis.crypto.getRandomValues(draw);
    for (let offset = 0; offset < draw.length; offset += 32) {
      const candidate = draw.slice(offset, offset + 32);
      if (secp256k1.utils.isValidPrivateKey(candidate)) keys.push(candidate);
    }
    draw.fill(0);
  }
  return keys;
}
