/**
 * EIP-712 pieces of the x402 authorization (docs/x402.md): the
 * TransferWithAuthorization type and the NativeTransferAuth domain on chain 77, and its digest,
 * hashed from its fixed layout (the precompile hashes the calldata words the same way), which
 * costs a tenth of a generic typed-data encoder on the origin's verification path.
 * Runtime-neutral: no `node:` imports.
 */

import type { Address, TypedDataDomain } from "viem";
import {
  CHAIN_ID,
  EIP712_DOMAIN_NAME,
  EIP712_DOMAIN_VERSION,
  NATIVE_TRANSFER_AUTH_ADDRESS,
} from "./constants.ts";
import { fromHex, type Hex, toHex } from "./hex.ts";
import { keccak256 } from "./keccak.ts";

export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

/** Domain: name USDC, version 2, chainId 77, verifyingContract = the precompile. */
export function nativeTransferAuthDomain(chainId: number = CHAIN_ID): TypedDataDomain {
  return {
    name: EIP712_DOMAIN_NAME,
    version: EIP712_DOMAIN_VERSION,
    chainId,
    verifyingContract: NATIVE_TRANSFER_AUTH_ADDRESS,
  };
}

export type TransferWithAuthorizationMessage = {
  from: Address;
  to: Address;
  /** 6-decimal units, as the precompile counts them. */
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
};

const encoder = new TextEncoder();

export const utf8 = (text: string): Uint8Array => encoder.encode(text);

const DOMAIN_TYPEHASH = keccak256(
  utf8("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
);
const TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak256(
  utf8(
    "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)",
  ),
);

/** The NativeTransferAuth domain's separator on `chainId` for the contract at `verifyingContract`. */
export function domainSeparator(chainId: bigint, verifyingContract: Uint8Array): Uint8Array {
  return keccak256(
    concat([
      DOMAIN_TYPEHASH,
      keccak256(utf8(EIP712_DOMAIN_NAME)),
      keccak256(utf8(EIP712_DOMAIN_VERSION)),
      uintWord(chainId),
      addressWord(verifyingContract),
    ]),
  );
}

/**
 * The digest a payer signs. `encodedFields` is abi.encode(from, to, value, validAfter,
 * validBefore, nonce): exactly the first six argument words of both transferWithAuthorization
 * variants once their address words are known to be clean, so calldata can be hashed as it stands.
 */
export function authorizationDigest(separator: Uint8Array, encodedFields: Uint8Array): Uint8Array {
  return typedDataDigest(separator, keccak256(concat([TRANSFER_WITH_AUTHORIZATION_TYPEHASH, encodedFields])));
}

/** EIP-712's digest of a struct's hash under a domain's separator: keccak256(0x1901 ‖ separator ‖ struct). */
export function typedDataDigest(separator: Uint8Array, structHash: Uint8Array): Uint8Array {
  return keccak256(concat([Uint8Array.of(0x19, 0x01), separator, structHash]));
}

const separators = new Map<number, Uint8Array>();

/** The EIP-712 digest of a TransferWithAuthorization under the NativeTransferAuth domain. */
export function transferWithAuthorizationDigest(
  message: TransferWithAuthorizationMessage,
  chainId: number = CHAIN_ID,
): Hex {
  let separator = separators.get(chainId);
  if (separator === undefined) {
    separator = domainSeparator(BigInt(chainId), fromHex(NATIVE_TRANSFER_AUTH_ADDRESS));
    separators.set(chainId, separator);
  }
  const nonce = fromHex(message.nonce);
  if (nonce.length !== 32) throw new RangeError("nonce must be 32 bytes");
  const fields = concat([
    addressWord(fromHex(message.from)),
    addressWord(fromHex(message.to)),
    uintWord(message.value),
    uintWord(message.validAfter),
    uintWord(message.validBefore),
    nonce,
  ]);
  return toHex(authorizationDigest(separator, fields));
}

const MAX_UINT256 = (1n << 256n) - 1n;

/** A uint256 as its 32-byte ABI word; throws outside the type's range. */
export function uintWord(value: bigint): Uint8Array {
  if (value < 0n || value > MAX_UINT256) throw new RangeError("uint256 out of range");
  return fromHex(`0x${value.toString(16).padStart(64, "0")}`);
}

function addressWord(address: Uint8Array): Uint8Array {
  if (address.length !== 20) throw new RangeError("an address is 20 bytes");
  const word = new Uint8Array(32);
  word.set(address, 12);
  return word;
}

export function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((length, part) => length + part.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
