/**
 * Signing one sender's queue in nonce order, the outbox's one rule for refusals: a nonce is taken
 * only by a signature that is kept, so a queue never leaves a hole of its own making (a hole left
 * by a transaction the chain does not mine is fillers.ts's).
 *
 * Each item is admitted once (the domain's checks, under the sender's nonce row lock), just before
 * its first signature. Admitted items are signed `window` at a time, at consecutive nonces, all
 * requests of a window at once. When the enclave refuses one, the signatures made behind it in its
 * window (never stored, never sent) are dropped and those items signed again, one at a time, from
 * the refused one's nonce.
 *
 * The window is the domain's to choose: 1 when each signature counts against a sealed budget of
 * the key (agent transfers, the faucet's payouts: a dropped signature would still have counted, and
 * a check that follows a signing must see it), the whole queue when nothing is counted per
 * signature (the settler's key: one enclave round trip for a whole batch).
 */
import type { SignerFailure, SignerResult, SignTransactionResult } from "../signer/types.ts";

export type SigningStep<Item> = {
  /** The domain's checks of one item, run once, before its first signature; false: refused. */
  admit(item: Item): boolean;
  sign(item: Item, nonce: bigint): Promise<SignerResult<SignTransactionResult>>;
  /** A signature kept at `nonce` (the domain counts it, for the checks of the items after it). */
  signed(item: Item, nonce: bigint, result: SignTransactionResult): void;
  /** The enclave would not sign the item: it takes no nonce. */
  unsigned(item: Item, failure: SignerFailure): void;
  /** How many admitted items are signed at once (see above); at least 1. */
  window: number;
};

/** Signs `items` from nonce `next`, in order; returns the next nonce free after them. */
export async function signInNonceOrder<Item>(
  items: readonly Item[],
  next: bigint,
  step: SigningStep<Item>,
): Promise<bigint> {
  let nonce = next;
  let n = 0;
  while (n < items.length) {
    const window: Item[] = [];
    for (; n < items.length && window.length < step.window; n++) {
      if (step.admit(items[n]!)) window.push(items[n]!);
    }
    const results = await Promise.all(window.map((item, k) => step.sign(item, nonce + BigInt(k))));
    let k = 0;
    for (; k < window.length; k++) {
      const result = results[k]!;
      if (!result.ok) break;
      step.signed(window[k]!, nonce + BigInt(k), result.value);
    }
    nonce += BigInt(k);
    if (k === window.length) continue;
    step.unsigned(window[k]!, (results[k] as { ok: false; error: SignerFailure }).error);
    for (const item of window.slice(k + 1)) {
      const result = await step.sign(item, nonce);
      if (!result.ok) {
        step.unsigned(item, result.error);
        continue;
      }
      step.signed(item, nonce, result.value);
      nonce++;
    }
  }
  return nonce;
}
