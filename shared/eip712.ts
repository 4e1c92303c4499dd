/**
 * EIP-712 pieces of the x402 authorization (SPEC "x402 objects", DESIGN §6): the
 * TransferWithAuthorization type and the NativeTransferAuth domain on chain 77.
 * Runtime-neutral: no `node:` imports.
 */
import { type Address, hashTypedData, type TypedDataDomain } from "viem";
import {
  CHAIN_ID,
  EIP712_DOMAIN_NAME,
  EIP712_DOMAIN_VERSION,
  NATIVE_TRANSFER_AUTH_ADDRESS,
} from "./constants.ts";
import type { Hex } from "./hex.ts";

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
  /** 6-decimal units, as the precompile counts them (DESIGN §6). */
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
};

/** The EIP-712 digest of a TransferWithAuthorization under the NativeTransferAuth domain. */
export function transferWithAuthorizationDigest(
  message: TransferWithAuthorizationMessage,
  chainId: number = CHAIN_ID,
): Hex {
  return hashTypedData({
    domain: nativeTransferAuthDomain(chainId),
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: "TransferWithAuthorization",
    message,
  });
}
