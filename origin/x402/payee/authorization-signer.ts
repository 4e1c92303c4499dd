/**
 * Who signed a TransferWithAuthorization: the address recovered from its EIP-712 digest and its
 * signature. The recovery is most of what a payment's pure checks cost (verify.ts checkPayment),
 * and the same payment is often checked again soon: a resource server verifies, then settles it;
 * a client retries it; a flood replays one signed payment past its payer's window, where the
 * payer is known only by recovering it. So the signers of the last few thousand (authorization,
 * signature) pairs are remembered. The key holds every field the digest is made of and the
 * signature, as given: a pair that differs anywhere is recovered anew, so a remembered answer is
 * always the one a recovery would give.
 */
import { transferWithAuthorizationDigest } from "../../../shared/eip712.ts";
import { fromHex, toHex } from "../../../shared/hex.ts";
import { keccak256 } from "../../../shared/keccak.ts";
import { RecencyMap } from "../../../shared/recency-map.ts";
import { recoverPublicKey } from "../../../shared/secp256k1.ts";
import type { Authorization } from "./payment.ts";

/** The signer's address in lower case, or null when the signature recovers no key. */
export type AuthorizationSigner = (authorization: Authorization, signature: string) => string | null;

/** How many pairs the origin remembers: about a megabyte, a few seconds of a flood at 2,000 a second. */
export const REMEMBERED_SIGNERS = 4_096;

export type SignerMemo = { signerOf: AuthorizationSigner; readonly size: number };

/** A memo of at most `capacity` pairs; the oldest is forgotten first. */
export function createSignerMemo(capacity: number): SignerMemo {
  const signers = new RecencyMap<string, string | null>();
  return {
    signerOf(authorization, signature) {
      const { from, to, value, validAfter, validBefore, nonce } = authorization;
      const key = `${signature}|${from}|${to}|${value}|${validAfter}|${validBefore}|${nonce}`;
      const known = signers.get(key);
      if (known !== undefined) return known;
      const signer = recoverSigner(authorization, signature);
      if (signers.size >= capacity) signers.shift();
      signers.set(key, signer);
      return signer;
    },
    get size() {
      return signers.size;
    },
  };
}

function recoverSigner(authorization: Authorization, signature: string): string | null {
  const publicKey = recoverPublicKey(fromHex(transferWithAuthorizationDigest(authorization)), signature);
  // The address is compared in lower case, so it is not checksummed (EIP-55 costs another Keccak).
  return publicKey ? toHex(keccak256(publicKey.subarray(1)).subarray(12)) : null;
}
