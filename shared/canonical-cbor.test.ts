import { describe, expect, it } from "vitest";
import { CanonicalCborError, encodeCanonicalCbor } from "./canonical-cbor.ts";
import { decodeCbor } from "./cbor-frame.ts";
import { toHex } from "./hex.ts";

const hex = (value: unknown): string => toHex(encodeCanonicalCbor(value));

describe("encodeCanonicalCbor (RFC 8949 §4.2.1)", () => {
  it("uses the shortest integer heads", () => {
    expect(hex(0)).toBe("0x00");
    expect(hex(23)).toBe("0x17");
    expect(hex(24)).toBe("0x1818");
    expect(hex(256)).toBe("0x190100");
    expect(hex(65_536)).toBe("0x1a00010000");
    expect(hex(2 ** 40)).toBe("0x1b0000010000000000");
    expect(hex(-1)).toBe("0x20");
    expect(hex(-25)).toBe("0x3818");
    expect(hex(2n ** 64n - 1n)).toBe("0x1bffffffffffffffff");
  });

  it("sorts map keys by their encoded bytes (shorter first), whatever the insertion order", () => {
    const a = encodeCanonicalCbor({ op: 1, ver: 2, a: 3, counter: 4 });
    const b = encodeCanonicalCbor({ counter: 4, a: 3, ver: 2, op: 1 });
    expect(toHex(a)).toBe(toHex(b));
    expect(Object.keys(decodeCbor(a) as object)).toEqual(["a", "op", "ver", "counter"]);
  });

  it("orders keys beyond ASCII by their UTF-8 bytes, not by JavaScript's string order", () => {
    // "\uE000a" (ee 80 80 61) sorts before the emoji (f0 9f 98 80) by bytes; UTF-16 says the reverse.
    expect(hex({ "\u{1F600}": 1, "\uE000a": 2, é: 3, aa: 4, b: 5 })).toBe(
      "0xa56162056261610462c3a90364ee8080610264f09f988001",
    );
  });

  it("writes long text and the integers at the edges of a number's and a head's range", () => {
    expect(hex("x".repeat(300)).slice(0, 14)).toBe("0x79012c787878");
    expect(hex(2 ** 53 - 1)).toBe("0x1b001fffffffffffff");
    expect(hex(-(2 ** 53 - 1))).toBe("0x3b001ffffffffffffe");
    expect(hex(-(2n ** 64n))).toBe("0x3bffffffffffffffff");
  });

  it("encodes strings, bytes, arrays, booleans and null", () => {
    expect(hex("a")).toBe("0x6161");
    expect(hex(Uint8Array.of(1, 2))).toBe("0x420102");
    expect(hex([1, [true, false, null]])).toBe("0x820183f5f4f6");
  });

  it("round-trips through cbor-x decoding", () => {
    const value = { n: 5, s: "x", b: Uint8Array.of(9), l: [1, "2"], m: { z: null } };
    expect(encodeCanonicalCbor(decodeCbor(encodeCanonicalCbor(value)))).toEqual(encodeCanonicalCbor(value));
  });

  it("refuses values without a canonical form", () => {
    for (const bad of [
      1.5,
      Number.NaN,
      undefined,
      { a: undefined },
      new Date(0),
      2n ** 64n,
      () => 1,
      new Map(),
    ]) {
      expect(() => encodeCanonicalCbor(bad)).toThrow(CanonicalCborError);
    }
  });
});
