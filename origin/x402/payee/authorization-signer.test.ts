import { describe, expect, it } from "vitest";
import { transferWithAuthorizationDigest } from "../../../shared/eip712.ts";
import { fromHex, type Hex, toHex } from "../../../shared/hex.ts";
import { addressOfPublicKey, publicKeyOf, randomPrivateKey, signDigest } from "../../../shared/secp256k1.ts";
import { createSignerMemo } from "./authorization-signer.ts";
import type { Authorization } from "./payment.ts";

// The memo of who signed an authorization (authorization-signer.ts): its answer must be the one a
// recovery would give, for a pair seen before and for every pair that differs from it anywhere.

function signed(privateKey = randomPrivateKey()): {
  signer: string;
  authorization: Authorization;
  signature: Hex;
} {
  const signer = addressOfPublicKey(publicKeyOf(privateKey)).toLowerCase();
  const authorization: Authorization = {
    from: signer as Hex,
    to: `0x${"42".repeat(20)}`,
    value: 10_000n,
    validAfter: 1_700_000_000n,
    validBefore: 1_700_000_060n,
    nonce: toHex(crypto.getRandomValues(new Uint8Array(32))),
  };
  const digest = fromHex(transferWithAuthorizationDigest(authorization));
  return { signer, authorization, signature: signDigest(digest, privateKey).signature };
}

describe("createSignerMemo", () => {
  it("answers a pair's signer in lower case, the first time and again", () => {
    const memo = createSignerMemo(16);
    for (let i = 0; i < 20; i++) {
      const { signer, authorization, signature } = signed();
      expect(memo.signerOf(authorization, signature)).toBe(signer);
      expect(memo.signerOf({ ...authorization }, signature)).toBe(signer);
    }
  });

  it("recovers anew a pair that differs from a remembered one in any field or in its signature", () => {
    const memo = createSignerMemo(16);
    const { signer, authorization, signature } = signed();
    expect(memo.signerOf(authorization, signature)).toBe(signer);
    const changes: Partial<Authorization>[] = [
      { from: `0x${"77".repeat(20)}` },
      { to: `0x${"43".repeat(20)}` },
      { value: authorization.value + 1n },
      { validAfter: authorization.validAfter + 1n },
      { validBefore: authorization.validBefore + 1n },
      { nonce: `0x${"cd".repeat(32)}` },
    ];
    for (const change of changes) {
      const answer = memo.signerOf({ ...authorization, ...change }, signature);
      expect(
        answer,
        JSON.stringify(change, (_, v) => (typeof v === "bigint" ? `${v}` : v)),
      ).not.toBe(signer);
    }
    // Another signer's signature over the same authorization recovers that signer.
    const other = randomPrivateKey();
    const otherSignature = signDigest(
      fromHex(transferWithAuthorizationDigest(authorization)),
      other,
    ).signature;
    expect(memo.signerOf(authorization, otherSignature)).toBe(
      addressOfPublicKey(publicKeyOf(other)).toLowerCase(),
    );
    // A signature that recovers no key answers null, and again null.
    const broken = `0x${"00".repeat(64)}1b` as Hex;
    expect(memo.signerOf(authorization, broken)).toBeNull();
    expect(memo.signerOf(authorization, broken)).toBeNull();
    expect(memo.signerOf(authorization, signature)).toBe(signer);
  });

  it("keeps at most its capacity, forgetting the oldest pair first", () => {
    const memo = createSignerMemo(8);
    const pairs = Array.from({ length: 20 }, () => signed());
    for (const { authorization, signature } of pairs) memo.signerOf(authorization, signature);
    expect(memo.size).toBe(8);
    // The oldest is recovered again (and still right); the memo stays at its capacity.
    const first = pairs[0]!;
    expect(memo.signerOf(first.authorization, first.signature)).toBe(first.signer);
    expect(memo.size).toBe(8);
  });
});
