import { describe, expect, it } from "vitest";
import { deriveBackupKey, generateSealingKey, SEAL_LABEL, SealError, seal, unseal } from "./sealing.ts";

describe("sealing (AES-256-GCM)", () => {
  const key = generateSealingKey();
  const plaintext = new TextEncoder().encode("key material");

  it("round-trips and never stores the plaintext", () => {
    const blob = seal(key, SEAL_LABEL.keySet, plaintext);
    expect(Buffer.from(blob).includes(Buffer.from(plaintext))).toBe(false);
    expect(new TextDecoder().decode(unseal(key, SEAL_LABEL.keySet, blob))).toBe("key material");
  });

  it("refuses another key, another purpose label, other associated data or a flipped bit", () => {
    const blob = seal(key, SEAL_LABEL.keySet, plaintext, Uint8Array.of(1));
    expect(() => unseal(generateSealingKey(), SEAL_LABEL.keySet, blob, Uint8Array.of(1))).toThrow(SealError);
    expect(() => unseal(key, SEAL_LABEL.state, blob, Uint8Array.of(1))).toThrow(SealError);
    expect(() => unseal(key, SEAL_LABEL.keySet, blob, Uint8Array.of(2))).toThrow(SealError);
    const flipped = new Uint8Array(blob);
    flipped[flipped.length - 1]! ^= 1;
    expect(() => unseal(key, SEAL_LABEL.keySet, flipped, Uint8Array.of(1))).toThrow(SealError);
    expect(() => unseal(key, SEAL_LABEL.keySet, Uint8Array.of(1, 2))).toThrow(SealError);
  });

  it("derives a distinct backup key per environment", () => {
    const a = deriveBackupKey(key, "env-a");
    expect(a).toHaveLength(32);
    expect(Buffer.from(a).equals(Buffer.from(deriveBackupKey(key, "env-b")))).toBe(false);
    expect(Buffer.from(a).equals(Buffer.from(key))).toBe(false);
  });
});
