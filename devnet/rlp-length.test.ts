import { toRlp } from "viem";
import { describe, expect, it } from "vitest";
import { rlpBytesLength, rlpListLength } from "./rlp-length.ts";

/** Lengths either side of each width of RLP's length prefix. */
const LENGTHS = [0, 1, 2, 54, 55, 56, 57, 255, 256, 257, 65_535, 65_536, 65_537, 16_777_216];

describe("RLP lengths counted without encoding", () => {
  it("gives a byte string's encoded length at each prefix width, and a single byte below 0x80 as itself", () => {
    for (const length of LENGTHS) {
      const bytes = new Uint8Array(length).fill(0xab);
      expect(rlpBytesLength(bytes), `${length} bytes`).toBe(toRlp(bytes, "bytes").length);
    }
    for (const byte of [0x00, 0x7f, 0x80, 0xff]) {
      const bytes = Uint8Array.of(byte);
      expect(rlpBytesLength(bytes), `the byte ${byte}`).toBe(toRlp(bytes, "bytes").length);
    }
  });

  it("gives a list's encoded length from its items' at each prefix width", () => {
    // A list of one item whose encoding takes `payload` bytes: a string of payload − its prefix.
    for (const length of LENGTHS) {
      const item = new Uint8Array(length).fill(0xab);
      const payload = toRlp(item, "bytes").length;
      expect(rlpListLength(payload), `a payload of ${payload} bytes`).toBe(toRlp([item], "bytes").length);
    }
    expect(rlpListLength(0)).toBe(toRlp([], "bytes").length);
  });
});
