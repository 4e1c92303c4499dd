import { encodeAbiParameters, keccak256, toHex } from "viem";
import { generatePrivateKey, privateKeyToAddress } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { authorizationSlotHex } from "./native-transfer-auth.ts";

/** Solidity's slot of map[authorizer][nonce] for `mapping(address => mapping(bytes32 => bool))` at slot 0, by viem. */
function soliditySlot(authorizer: `0x${string}`, nonce: `0x${string}`): `0x${string}` {
  const inner = keccak256(encodeAbiParameters([{ type: "address" }, { type: "uint256" }], [authorizer, 0n]));
  return keccak256(encodeAbiParameters([{ type: "bytes32" }, { type: "bytes32" }], [nonce, inner]));
}

describe("authorizationSlot", () => {
  it("is Solidity's slot of map[authorizer][nonce] at slot 0, over random authorizers and nonces", () => {
    for (let i = 0; i < 200; i++) {
      const authorizer = privateKeyToAddress(generatePrivateKey());
      const nonce = toHex(crypto.getRandomValues(new Uint8Array(32)));
      expect(authorizationSlotHex(authorizer, nonce)).toBe(soliditySlot(authorizer, nonce));
      // The same address in lower case names the same slot.
      expect(authorizationSlotHex(authorizer.toLowerCase() as `0x${string}`, nonce)).toBe(
        soliditySlot(authorizer, nonce),
      );
    }
  });

  it("refuses an authorizer or a nonce of another length", () => {
    const nonce = toHex(new Uint8Array(32).fill(7));
    expect(() => authorizationSlotHex(`0x${"11".repeat(19)}`, nonce)).toThrow(/20-byte authorizer/);
    expect(() => authorizationSlotHex(`0x${"11".repeat(20)}`, `0x${"07".repeat(31)}`)).toThrow(
      /32-byte nonce/,
    );
  });
});
