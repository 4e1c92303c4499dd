import { keccak256, recoverAddress } from "viem";
import { describe, expect, it } from "vitest";
import { fromHex, type Hex, toHex } from "./hex.ts";
import {
  buildIdentityProofPreimage,
  identityProofDigest,
  type VerifyIdentityProofParams,
  verifyIdentityProof,
} from "./identity-proof.ts";
import { addressOfPublicKey, publicKeyOf, signDigest } from "./secp256k1.ts";

// Golden vector (the byte layout in identity-proof.ts). Computed once and hard-coded: a change of layout,
// label, hashing or signature encoding must fail this test.
const PRIVATE_KEY = fromHex("0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318");
const ENV_ID = "golden-env";
const KEY_REF = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const NONCE = `0x${"5a".repeat(32)}` as Hex;
const PUBLIC_KEY =
  "0x044e3b81af9c2234cad09d679ce6035ed1392347ce64ce405f5dcd36228a25de6e47fd35c4215d1edf53e6f83de344615ce719bdb0fd878f6ed76f06dd277956de";
const ADDRESS = "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23";
const PREIMAGE = [
  "0x19", // EIP-191 prefix
  "1f", // len(label) = 31
  toHex(new TextEncoder().encode("svc-hsm/agent-identity-proof/v1")).slice(2),
  "000000000000004d", // chain id 77, 8 bytes big-endian
  "0a", // len(env_id) = 10
  toHex(new TextEncoder().encode(ENV_ID)).slice(2),
  KEY_REF,
  PUBLIC_KEY.slice(2),
  ADDRESS.slice(2).toLowerCase(),
  "5a".repeat(32),
].join("");
const PREIMAGE_HEX =
  "0x191f7376632d68736d2f6167656e742d6964656e746974792d70726f6f662f7631000000000000004d0a676f6c64656e2d656e7600112233445566778899aabbccddeeff00112233445566778899aabbccddeeff044e3b81af9c2234cad09d679ce6035ed1392347ce64ce405f5dcd36228a25de6e47fd35c4215d1edf53e6f83de344615ce719bdb0fd878f6ed76f06dd277956de2c7536e3605d9c16a7a3d7b1898e529396a65c235a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a";
const DIGEST = "0x8271853ea49b40c0a48f1b43510c964bc73fa954f3390c48fafc242c0e23d443";
const SIGNATURE =
  "0x198e48e32ff9266364f185f5f5de71c96e22d42d5fd30e0900b8f56f86dc4ba815c2b2c7c7085f9e3188099e0651f62a4f0aa353b899aeb7461147ec7c2021a61c";

const fields = {
  chainId: 77,
  envId: ENV_ID,
  keyRef: KEY_REF,
  publicKey: PUBLIC_KEY as Hex,
  address: ADDRESS as Hex,
  verifierNonce: NONCE,
};

const verifyParams = (overrides: Partial<VerifyIdentityProofParams> = {}): VerifyIdentityProofParams => ({
  chainId: 77,
  envId: ENV_ID,
  keyRef: KEY_REF,
  storedWallet: ADDRESS,
  verifierNonce: NONCE,
  publicKey: PUBLIC_KEY as Hex,
  address: ADDRESS,
  signature: SIGNATURE,
  ...overrides,
});

describe("identity proof golden vector", () => {
  it("derives the public key and address of the fixed key", () => {
    expect(toHex(publicKeyOf(PRIVATE_KEY))).toBe(PUBLIC_KEY);
    expect(addressOfPublicKey(fromHex(PUBLIC_KEY))).toBe(ADDRESS);
  });

  it("builds the fixed 201-byte preimage in the byte layout buildIdentityProofPreimage documents", () => {
    const preimage = buildIdentityProofPreimage(fields);
    expect(preimage.length).toBe(201);
    expect(toHex(preimage)).toBe(PREIMAGE_HEX);
    expect(PREIMAGE).toBe(PREIMAGE_HEX);
  });

  it("hashes to the fixed keccak256 digest", () => {
    const digest = identityProofDigest(buildIdentityProofPreimage(fields));
    expect(toHex(digest)).toBe(DIGEST);
    expect(keccak256(PREIMAGE_HEX)).toBe(DIGEST);
  });

  it("signs to the fixed low-S signature, which recovers to the address", async () => {
    expect(signDigest(fromHex(DIGEST), PRIVATE_KEY).signature).toBe(SIGNATURE);
    expect(await recoverAddress({ hash: DIGEST, signature: SIGNATURE })).toBe(ADDRESS);
  });

  it("verifies the vector", () => {
    expect(verifyIdentityProof(verifyParams())).toEqual({ ok: true });
  });
});

describe("verifyIdentityProof refusals", () => {
  it("refuses another nonce, env id, chain id or key_ref", () => {
    const refused = { ok: false, error: "signature_invalid" };
    expect(verifyIdentityProof(verifyParams({ verifierNonce: `0x${"5b".repeat(32)}` }))).toEqual(refused);
    expect(verifyIdentityProof(verifyParams({ envId: "golden-env2" }))).toEqual(refused);
    expect(verifyIdentityProof(verifyParams({ chainId: 78 }))).toEqual(refused);
    expect(verifyIdentityProof(verifyParams({ keyRef: "ff".repeat(32) }))).toEqual(refused);
  });

  it("refuses a proof for another stored wallet", () => {
    expect(
      verifyIdentityProof(verifyParams({ storedWallet: "0x0000000000000000000000000000000000000001" })),
    ).toEqual({
      ok: false,
      error: "wallet_mismatch",
    });
  });

  it("refuses a public key that does not hash to the address, or is not on the curve", () => {
    const otherKey = toHex(publicKeyOf(fromHex(`0x${"11".repeat(32)}`)));
    expect(verifyIdentityProof(verifyParams({ publicKey: otherKey }))).toEqual({
      ok: false,
      error: "address_mismatch",
    });
    const offCurve = `0x04${"01".repeat(64)}` as Hex;
    expect(verifyIdentityProof(verifyParams({ publicKey: offCurve }))).toEqual({
      ok: false,
      error: "public_key_invalid",
    });
    expect(verifyIdentityProof(verifyParams({ publicKey: `0x02${PUBLIC_KEY.slice(4, 68)}` }))).toEqual({
      ok: false,
      error: "public_key_invalid",
    });
  });

  it("refuses the high-S twin of a valid signature (EIP-2)", () => {
    const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
    const bytes = fromHex(SIGNATURE);
    const s = BigInt(toHex(bytes.subarray(32, 64)));
    const highS = fromHex(`0x${(n - s).toString(16).padStart(64, "0")}`);
    const twin = new Uint8Array(bytes);
    twin.set(highS, 32);
    twin[64] = bytes[64] === 27 ? 28 : 27;
    expect(verifyIdentityProof(verifyParams({ signature: toHex(twin) }))).toEqual({
      ok: false,
      error: "signature_invalid",
    });
  });

  it("refuses a signature by another key", () => {
    const other = signDigest(fromHex(DIGEST), fromHex(`0x${"22".repeat(32)}`)).signature;
    expect(verifyIdentityProof(verifyParams({ signature: other }))).toEqual({
      ok: false,
      error: "signature_invalid",
    });
  });

  it("rejects invalid preimage fields loudly (a caller bug)", () => {
    expect(() => buildIdentityProofPreimage({ ...fields, envId: "Bad_Env" })).toThrow();
    expect(() => buildIdentityProofPreimage({ ...fields, keyRef: "00" })).toThrow();
    expect(() => buildIdentityProofPreimage({ ...fields, verifierNonce: "0x00" })).toThrow();
  });
});
