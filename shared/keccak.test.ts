/**
 * The native Keccak-256 (shared/keccak.ts) stands in for @noble/hashes in the devnet, the enclave
 * and the origin: these tests hold it to noble's digests, byte for byte, across the sponge's block
 * boundaries.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { keccak_256 } from "@noble/hashes/sha3";
import { describe, expect, it } from "vitest";
import { keccak256, keccakBackend } from "./keccak.ts";

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex");

describe("keccak256", () => {
  it("loads the prebuilt binding wherever the package ships one for this platform", () => {
    const prebuilds = path.join(
      path.dirname(createRequire(import.meta.url).resolve("keccak/package.json")),
      "prebuilds",
    );
    // Elsewhere noble serves, and the tests below compare noble with itself.
    expect(keccakBackend).toBe(
      existsSync(path.join(prebuilds, `${process.platform}-${process.arch}`)) ? "native" : "noble",
    );
  });

  it("hashes exactly as noble does, at every length from 0 to 600 bytes and on random inputs", () => {
    // The rate is 136 bytes: lengths around each multiple pad across a block boundary.
    for (let length = 0; length <= 600; length++) {
      const data = Uint8Array.from({ length }, (_, i) => (i * 131 + length) & 0xff);
      expect(hex(keccak256(data)), `length ${length}`).toBe(hex(keccak_256(data)));
    }
    for (let i = 0; i < 200; i++) {
      const data = crypto.getRandomValues(new Uint8Array(1 + Math.floor(Math.random() * 4_000)));
      expect(hex(keccak256(data))).toBe(hex(keccak_256(data)));
    }
    // The empty input's digest, as Ethereum knows it (the hash of empty code).
    expect(hex(keccak256(new Uint8Array(0)))).toBe(
      "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470",
    );
  });

  it("hashes a view into a larger buffer by its own bytes, and hands back a fresh plain array each time", () => {
    const backing = crypto.getRandomValues(new Uint8Array(300));
    const view = backing.subarray(17, 217);
    expect(hex(keccak256(view))).toBe(hex(keccak_256(view.slice())));
    const first = keccak256(view);
    const second = keccak256(new Uint8Array(5));
    expect(Object.getPrototypeOf(first)).toBe(Uint8Array.prototype);
    expect(first.byteLength).toBe(32);
    expect(first.buffer.byteLength).toBe(32);
    expect(hex(first)).toBe(hex(keccak_256(view.slice())));
    expect(hex(second)).toBe(hex(keccak_256(new Uint8Array(5))));
  });
});
