/**
 * shared/address.ts replaces viem's getAddress and isAddress (strict, their default) where keys are
 * made and checked: these tests hold it to viem's answers.
 */
import { randomBytes } from "node:crypto";
import { getAddress, isAddress } from "viem";
import { describe, expect, it } from "vitest";
import { checksumAddress, isChecksummedOrLowerAddress } from "./address.ts";

const randomAddress = (): string => `0x${randomBytes(20).toString("hex")}`;

describe("checksumAddress", () => {
  it("gives viem's EIP-55 form for 500 random addresses, whatever case they come in", () => {
    for (let i = 0; i < 500; i++) {
      const lower = randomAddress();
      const expected = getAddress(lower);
      expect(checksumAddress(lower)).toBe(expected);
      expect(checksumAddress(`0x${lower.slice(2).toUpperCase()}`)).toBe(expected);
      expect(checksumAddress(expected)).toBe(expected);
    }
  });

  it("matches EIP-55's own examples", () => {
    for (const address of [
      "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
      "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
      "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
      "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
    ]) {
      expect(checksumAddress(address.toLowerCase())).toBe(address);
    }
  });

  it("refuses what is not 20 bytes of hex", () => {
    for (const bad of [
      "",
      "0x",
      `0x${"ab".repeat(19)}`,
      `0x${"ab".repeat(21)}`,
      `0X${"ab".repeat(20)}`,
      `0x${"zz".repeat(20)}`,
    ]) {
      expect(() => checksumAddress(bad)).toThrow("not a 20-byte hex address");
    }
  });
});

describe("isChecksummedOrLowerAddress", () => {
  it("answers as viem's strict isAddress for lower, checksummed, upper and miscased addresses", () => {
    for (let i = 0; i < 300; i++) {
      const lower = randomAddress();
      const checksummed = getAddress(lower);
      // One letter of the checksum flipped: what a typo in a copied address looks like.
      const letter = [...checksummed].findIndex((c, index) => index > 1 && /[a-fA-F]/.test(c));
      const flipped =
        letter < 0
          ? checksummed
          : checksummed.slice(0, letter) +
            (checksummed[letter] === checksummed[letter]!.toLowerCase()
              ? checksummed[letter]!.toUpperCase()
              : checksummed[letter]!.toLowerCase()) +
            checksummed.slice(letter + 1);
      for (const candidate of [lower, checksummed, `0x${lower.slice(2).toUpperCase()}`, flipped]) {
        expect(isChecksummedOrLowerAddress(candidate), candidate).toBe(isAddress(candidate));
      }
    }
  });

  it("refuses a flipped checksum letter and what is not an address", () => {
    expect(isChecksummedOrLowerAddress("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed")).toBe(true);
    expect(isChecksummedOrLowerAddress("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD")).toBe(false);
    expect(isChecksummedOrLowerAddress("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed")).toBe(true);
    expect(isChecksummedOrLowerAddress("0x5aaeb6053f3e94c9b9a09f33669435e7ef1beae")).toBe(false);
    expect(isChecksummedOrLowerAddress("5aaeb6053f3e94c9b9a09f33669435e7ef1beaed00")).toBe(false);
  });
});
