/**
 * libsecp256k1 (shared/libsecp256k1.ts) stands in for @noble/curves in signing, recovery and public
 * keys, in the enclave, the origin and the devnet: these tests hold it to noble's answers, byte for
 * byte, on random keys and digests and on the inputs both must refuse.
 */
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { ecrecover as nobleEcrecover } from "@ethereumjs/util";
import { secp256k1 } from "@noble/curves/secp256k1";
import { describe, expect, it } from "vitest";
import { ecrecover } from "../devnet/chain/signature-recovery.ts";
import { fromHex, toHex } from "./hex.ts";
import { libsecp256k1, secp256k1Backend } from "./libsecp256k1.ts";
import { publicKeyOf, randomPrivateKeys, recoverPublicKey, signDigest } from "./secp256k1.ts";

const N = secp256k1.CURVE.n;
const random32 = (): Uint8Array => crypto.getRandomValues(new Uint8Array(32));
const word = (value: bigint): Uint8Array => fromHex(toHex32(value));
const toHex32 = (value: bigint): `0x${string}` => `0x${value.toString(16).padStart(64, "0")}`;

describe("secp256k1 through libsecp256k1", () => {
  it("loads the prebuilt binding wherever the package ships one for this platform", () => {
    const prebuilds = path.join(
      path.dirname(createRequire(import.meta.url).resolve("secp256k1")),
      "prebuilds",
    );
    const shipped = existsSync(path.join(prebuilds, `${process.platform}-${process.arch}`));
    // Elsewhere noble serves, and the tests below compare noble with itself.
    expect(secp256k1Backend).toBe(shipped ? "libsecp256k1" : "noble");
    expect(libsecp256k1 !== undefined).toBe(shipped);
  });

  it("signs exactly as noble does (RFC 6979, low S) and recovers the signer, over 200 random keys", () => {
    for (let i = 0; i < 200; i++) {
      const key = secp256k1.utils.randomPrivateKey();
      const digest = random32();
      const ours = signDigest(digest, key);
      const noble = secp256k1.sign(digest, key, { lowS: true });
      expect(ours.r).toBe(noble.r);
      expect(ours.s).toBe(noble.s);
      expect(ours.yParity).toBe(noble.recovery);
      expect(ours.s <= N >> 1n).toBe(true);
      expect(toHex(recoverPublicKey(digest, ours.signature)!)).toBe(
        toHex(secp256k1.getPublicKey(key, false)),
      );
    }
  });

  it("derives each public key as noble does, over 200 random keys, and refuses the keys noble refuses", () => {
    for (let i = 0; i < 200; i++) {
      const key = secp256k1.utils.randomPrivateKey();
      expect(toHex(publicKeyOf(key))).toBe(toHex(secp256k1.getPublicKey(key, false)));
    }
    for (const invalid of [0n, N, N + 1n]) {
      expect(() => secp256k1.getPublicKey(word(invalid), false)).toThrow();
      expect(() => publicKeyOf(word(invalid))).toThrow();
    }
  });

  it("refuses what noble's path refuses: high S, a bad v, r or s zero or not below the order, a wrong length", () => {
    const key = secp256k1.utils.randomPrivateKey();
    const digest = random32();
    const { signature, s } = signDigest(digest, key);
    const bytes = fromHex(signature);
    const withS = (value: bigint): string =>
      toHex(new Uint8Array([...bytes.subarray(0, 32), ...word(value), bytes[64]!]));
    const withR = (value: bigint): string =>
      toHex(new Uint8Array([...word(value), ...bytes.subarray(32, 64), bytes[64]!]));
    expect(recoverPublicKey(digest, withS(N - s))).toBeNull();
    expect(recoverPublicKey(digest, toHex(new Uint8Array([...bytes.subarray(0, 64), 29])))).toBeNull();
    expect(recoverPublicKey(digest, withR(0n))).toBeNull();
    expect(recoverPublicKey(digest, withR(N))).toBeNull();
    expect(recoverPublicKey(digest, withS(0n))).toBeNull();
    expect(recoverPublicKey(digest, toHex(bytes.subarray(0, 64)))).toBeNull();
  });

  it("gives the devnet @ethereumjs/util's ecrecover answers and errors, v as 27/28, 0/1 and EIP-155", () => {
    for (let i = 0; i < 50; i++) {
      const key = secp256k1.utils.randomPrivateKey();
      const digest = random32();
      const { r, s, yParity } = signDigest(digest, key);
      const cases: Array<[bigint, bigint | undefined]> = [
        [BigInt(27 + yParity), undefined],
        [BigInt(yParity), 77n],
        [BigInt(77 * 2 + 35 + yParity), 77n],
      ];
      for (const [v, chainId] of cases) {
        expect(toHex(ecrecover(digest, v, word(r), word(s), chainId))).toBe(
          toHex(nobleEcrecover(digest, v, word(r), word(s), chainId)),
        );
      }
    }
    const digest = random32();
    const { r, s } = signDigest(digest, secp256k1.utils.randomPrivateKey());
    for (const [v, rr, ss] of [
      [29n, r, s],
      [27n, 0n, s],
      [27n, r, N],
    ] as const) {
      expect(() => nobleEcrecover(digest, v, word(rr), word(ss))).toThrow();
      expect(() => ecrecover(digest, v, word(rr), word(ss))).toThrow();
    }
  });
});

describe("randomPrivateKeys", () => {
  it("gives each key 32 bytes of its own, valid and distinct, across more than one draw's worth", () => {
    // 2,048 keys fill one 64 KiB draw: 2,100 need a second.
    const keys = randomPrivateKeys(2_100);
    expect(keys).toHaveLength(2_100);
    expect(keys.every((key) => key.length === 32 && secp256k1.utils.isValidPrivateKey(key))).toBe(true);
    expect(new Set(keys.map((key) => toHex(key))).size).toBe(2_100);
    // Each key is a copy: zeroing one (as a keystore may) leaves the next intact.
    const next = toHex(keys[1]!);
    keys[0]!.fill(0);
    expect(toHex(keys[1]!)).toBe(next);
    expect(keys[1]!.byteOffset).toBe(0);
  });
});
