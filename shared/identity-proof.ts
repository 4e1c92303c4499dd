/**
 * Identity proof (proof of possession of the wallet's key): the preimage builder the
 * enclave signs and the verifier the origin runs. The preimage starts with 0x19 (EIP-191), so it
 * can never be an RLP transaction, and carries its own label, so it is no other signed message.
 * Runtime-neutral: no `node:` imports.
 */

import { type Address, isAddress } from "viem";
import { IDENTITY_PROOF_LABEL } from "./constants.ts";
import { equalBytes, fromHex, type Hex } from "./hex.ts";
import { keccak256 } from "./keccak.ts";
import { err, ok, type Result } from "./result.ts";
import { addressOfPublicKey, isUncompressedPublicKey, recoverPublicKey } from "./secp256k1.ts";

/** `env_id` is `[a-z0-9-]{1,64}`. */
export const ENV_ID_PATTERN = /^[a-z0-9-]{1,64}$/;
/** key_ref is a 64-character hex handle (32 bytes). */
export const KEY_REF_PATTERN = /^[0-9a-f]{64}$/;

export type IdentityProofFields = {
  chainId: number | bigint;
  envId: string;
  keyRef: string;
  /** 65-byte uncompressed SEC1 public key. */
  publicKey: Uint8Array | Hex;
  address: Address;
  /** 32 bytes chosen fresh by the verifier. */
  verifierNonce: Uint8Array | Hex;
};

const textEncoder = new TextEncoder();
const EIP191_PREFIX = 0x19;

/**
 * Byte layout: 0x19 ‖ len(label) (1 byte) ‖ label ‖ chain_id (8 bytes BE) ‖
 * len(env_id) (1 byte) ‖ env_id ‖ key_ref (32) ‖ pubkey (65, uncompressed) ‖ address (20) ‖
 * verifier_nonce (32). Throws on a field outside its format (a caller bug, not a verdict).
 */
export function buildIdentityProofPreimage(fields: IdentityProofFields): Uint8Array {
  const label = textEncoder.encode(IDENTITY_PROOF_LABEL);
  if (!ENV_ID_PATTERN.test(fields.envId)) throw new Error("env_id must match [a-z0-9-]{1,64}");
  if (!KEY_REF_PATTERN.test(fields.keyRef)) throw new Error("key_ref must be 64 lowercase hex");
  const envId = textEncoder.encode(fields.envId);
  const chainId = BigInt(fields.chainId);
  if (chainId < 0n || chainId >= 1n << 64n) throw new Error("chain_id must fit 8 bytes");
  const publicKey = asBytes(fields.publicKey, 65, "public key");
  if (!isAddress(fields.address, { strict: false })) throw new Error("address must be 20-byte hex");
  const address = fromHex(fields.address);
  const nonce = asBytes(fields.verifierNonce, 32, "verifier nonce");

  const parts: Uint8Array[] = [
    Uint8Array.of(EIP191_PREFIX, label.length),
    label,
    uint64BigEndian(chainId),
    Uint8Array.of(envId.length),
    envId,
    fromHex(fields.keyRef),
    publicKey,
    address,
    nonce,
  ];
  const total = parts.reduce((sum, part) => sum + part.length, 0);
  const preimage = new Uint8Array(total);
  let offset = 0;
  for (const part of parts) {
    preimage.set(part, offset);
    offset += part.length;
  }
  return preimage;
}

/** keccak256 of the preimage: the digest the enclave signs (low-S). */
export function identityProofDigest(preimage: Uint8Array): Uint8Array {
  return keccak256(preimage);
}

export type VerifyIdentityProofParams = {
  /** What the verifier expects, from its own configuration and database, never from the reply. */
  chainId: number | bigint;
  envId: string;
  keyRef: string;
  storedWallet: Address;
  verifierNonce: Uint8Array | Hex;
  /** What the enclave answered. */
  publicKey: Hex;
  address: Address;
  signature: Hex;
};

export type IdentityProofFailure =
  | "public_key_invalid"
  | "address_mismatch"
  | "wallet_mismatch"
  | "signature_invalid";

export type VerifyIdentityProofResult = Result<void, IdentityProofFailure>;

/**
 * The public key must be on the curve and hash to the address, the address
 * must equal the stored wallet, and the signature over the preimage built from the verifier's own
 * chain id, env id, key_ref and nonce must recover to that key (low-S only).
 */
export function verifyIdentityProof(params: VerifyIdentityProofParams): VerifyIdentityProofResult {
  let publicKey: Uint8Array;
  try {
    publicKey = fromHex(params.publicKey);
  } catch {
    return err("public_key_invalid");
  }
  if (!isUncompressedPublicKey(publicKey)) return err("public_key_invalid");
  if (!isAddress(params.address, { strict: false })) return err("address_mismatch");
  const derived = addressOfPublicKey(publicKey);
  if (derived.toLowerCase() !== params.address.toLowerCase()) return err("address_mismatch");
  if (derived.toLowerCase() !== params.storedWallet.toLowerCase()) {
    return err("wallet_mismatch");
  }
  let digest: Uint8Array;
  try {
    digest = identityProofDigest(
      buildIdentityProofPreimage({
        chainId: params.chainId,
        envId: params.envId,
        keyRef: params.keyRef,
        publicKey,
        address: derived,
        verifierNonce: params.verifierNonce,
      }),
    );
  } catch {
    return err("signature_invalid");
  }
  const recovered = recoverPublicKey(digest, params.signature);
  if (!recovered || !equalBytes(recovered, publicKey)) return err("signature_invalid");
  return ok(undefined);
}

function asBytes(value: Uint8Array | Hex, length: number, what: string): Uint8Array {
  const bytes = typeof value === "string" ? fromHex(value) : value;
  if (bytes.length !== length) throw new Error(`${what} must be ${length} bytes`);
  return bytes;
}

function uint64BigEndian(value: bigint): Uint8Array {
  const bytes = new Uint8Array(8);
  new DataView(bytes.buffer).setBigUint64(0, value, false);
  return bytes;
}
