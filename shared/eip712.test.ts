/**
 * The origin verifies and the enclave signs x402 authorizations over transferWithAuthorizationDigest,
 * hashed from the fixed layout: it must be viem's EIP-712 digest of the same typed data, bit for bit.
 */
import { hashTypedData } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { CHAIN_ID } from "./constants.ts";
import {
  nativeTransferAuthDomain,
  TRANSFER_WITH_AUTHORIZATION_TYPES,
  type TransferWithAuthorizationMessage,
  transferWithAuthorizationDigest,
} from "./eip712.ts";
import { toHex } from "./hex.ts";

const address = () => privateKeyToAccount(generatePrivateKey()).address;
const uint = (bits: number): bigint => {
  const bytes = crypto.getRandomValues(new Uint8Array(bits / 8));
  return BigInt(toHex(bytes));
};

describe("transferWithAuthorizationDigest", () => {
  it("equals viem's EIP-712 digest of the same message, over random messages and the extremes", () => {
    const messages: TransferWithAuthorizationMessage[] = Array.from({ length: 100 }, () => ({
      from: address(),
      to: address(),
      value: uint(64),
      validAfter: uint(32),
      validBefore: uint(32),
      nonce: toHex(crypto.getRandomValues(new Uint8Array(32))),
    }));
    messages.push({
      from: address(),
      to: address(),
      value: (1n << 256n) - 1n,
      validAfter: 0n,
      validBefore: (1n << 256n) - 1n,
      nonce: `0x${"00".repeat(32)}`,
    });
    for (const chainId of [CHAIN_ID, 1]) {
      for (const message of messages) {
        expect(transferWithAuthorizationDigest(message, chainId)).toBe(
          hashTypedData({
            domain: nativeTransferAuthDomain(chainId),
            types: TRANSFER_WITH_AUTHORIZATION_TYPES,
            primaryType: "TransferWithAuthorization",
            message,
          }),
        );
      }
    }
  });

  it("refuses what is no uint256 or bytes32 instead of hashing something else", () => {
    const message = { from: address(), to: address(), value: 1n, validAfter: 0n, validBefore: 1n };
    expect(() =>
      transferWithAuthorizationDigest({ ...message, value: -1n, nonce: `0x${"00".repeat(32)}` }),
    ).toThrow(RangeError);
    expect(() =>
      transferWithAuthorizationDigest({ ...message, value: 1n << 256n, nonce: `0x${"00".repeat(32)}` }),
    ).toThrow(RangeError);
    expect(() => transferWithAuthorizationDigest({ ...message, nonce: `0x${"00".repeat(31)}` })).toThrow(
      RangeError,
    );
  });
});
