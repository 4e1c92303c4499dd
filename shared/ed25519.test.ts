/**
 * Node's Ed25519 (shared/ed25519.ts) stands in for @noble/curves in capabilities: these tests hold
 * it to noble's answers, byte for byte, on random secrets and messages, and to noble's strict
 * (non-ZIP-215) refusals.
 */
import { ed25519 } from "@noble/curves/ed25519";
import { describe, expect, it } from "vitest";
import { ed25519PublicKey, ed25519Sign, ed25519Verify } from "./ed25519.ts";
import { toHex } from "./hex.ts";

const random = (length: number): Uint8Array => crypto.getRandomValues(new Uint8Array(length));
const L = 2n ** 252n + 27742317777372353535851937790883648493n;
const P = 2n ** 255n - 19n;
const littleEndian = (value: bigint): Uint8Array => {
  const bytes = new Uint8Array(32);
  for (let i = 0; i < 32; i++) bytes[i] = Number((value >> BigInt(8 * i)) & 0xffn);
  return bytes;
};
const fromLittleEndian = (bytes: Uint8Array): bigint =>
  bytes.reduceRight((value, byte) => (value << 8n) | BigInt(byte), 0n);

describe("Ed25519 through node:crypto", () => {
  it("derives keys and signs exactly as noble does, and each verifies the other's, over 200 random secrets", () => {
    for (let i = 0; i < 200; i++) {
      const secret = random(32);
      const message = random(1 + (i % 300));
      expect(toHex(ed25519PublicKey(secret))).toBe(toHex(ed25519.getPublicKey(secret)));
      const signature = ed25519Sign(message, secret);
      expect(toHex(signature)).toBe(toHex(ed25519.sign(message, secret)));
      expect(ed25519Verify(signature, message, ed25519PublicKey(secret))).toBe(true);
      expect(ed25519.verify(signature, message, ed25519.getPublicKey(secret), { zip215: false })).toBe(true);
    }
  });

  it("refuses what noble's strict verification refuses: another message or key, S + L, a non-canonical key, a key off the curve, wrong lengths", () => {
    const secret = random(32);
    const message = random(64);
    const publicKey = ed25519PublicKey(secret);
    const signature = ed25519Sign(message, secret);
    const both = (sig: Uint8Array, msg: Uint8Array, key: Uint8Array): [boolean, boolean] => {
      let noble = false;
      try {
        noble = ed25519.verify(sig, msg, key, { zip215: false });
      } catch {
        noble = false;
      }
      return [ed25519Verify(sig, msg, key), noble];
    };

    expect(both(signature, random(64), publicKey)).toEqual([false, false]);
    expect(both(signature, message, ed25519PublicKey(random(32)))).toEqual([false, false]);
    // S + L: the same scalar mod L, refused as malleable.
    const s = fromLittleEndian(signature.subarray(32));
    const malleable = Uint8Array.from(signature);
    malleable.set(littleEndian(s + L), 32);
    expect(s + L < 2n ** 256n).toBe(true);
    expect(both(malleable, message, publicKey)).toEqual([false, false]);
    // A key whose y is written as y + p: y = 1 (the neutral point) as 1 + p.
    const nonCanonical = littleEndian(1n + P);
    expect(both(signature, message, nonCanonical)).toEqual([false, false]);
    const offCurve = Uint8Array.from(publicKey);
    let refusedOffCurve = false;
    for (let y = 2n; y < 50n && !refusedOffCurve; y++) {
      // Some y have no x on the curve: such an encoding is no key at all.
      const candidate = littleEndian(y);
      let onCurve = true;
      try {
        ed25519.ExtendedPoint.fromHex(candidate);
      } catch {
        onCurve = false;
      }
      if (!onCurve) {
        offCurve.set(candidate);
        refusedOffCurve = true;
      }
    }
    expect(refusedOffCurve).toBe(true);
    expect(both(signature, message, offCurve)).toEqual([false, false]);
    expect(ed25519Verify(signature.subarray(0, 63), message, publicKey)).toBe(false);
    expect(ed25519Verify(signature, message, publicKey.subarray(0, 31))).toBe(false);
  });
});
