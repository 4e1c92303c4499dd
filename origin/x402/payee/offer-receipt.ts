/**
 * The demo's offers and receipts, the x402 offer-receipt extension in its EIP-712 format
 * (docs/x402.md#offers-and-receipts): a signed offer for each `accepts` entry of a 402, under
 * `extensions["offer-receipt"].info.offers`, and a signed receipt naming the settlement's
 * transaction in the 200's PAYMENT-RESPONSE, under `extensions["offer-receipt"].info.receipt`.
 * Both are signed in the enclave by the payee key, whose address must be the quote's payTo; a
 * node whose payTo is another address serves neither (and says so once, at start). A signing that
 * fails leaves the answer without its offer or receipt, never refused for it: a paid answer's
 * receipt is asked for once its paid answer is taken, and waits at most the signer client's timeout.
 */
import type { Address } from "viem";
import type { Hex } from "../../../shared/hex.ts";
import type { Logger } from "../../logger.ts";
import type { SignedX402Offer, SignedX402Receipt, SignerClient } from "../../signer/types.ts";
import type { PaymentRequirements } from "./requirements.ts";

/** The extension's key in `extensions`, as the official package names it. */
export const OFFER_RECEIPT = "offer-receipt";

export type EIP712SignedOffer = SignedX402Offer & { format: "eip712"; acceptIndex: number };
export type EIP712SignedReceipt = SignedX402Receipt & { format: "eip712" };

export type OfferReceipts = {
  /**
   * The `extensions` entry of a 402 for `resourceUrl`, a signed offer per accepts entry, and how
   * long from now (ms) the node serves this same offer.
   */
  offersExtension(
    resourceUrl: string,
    /** Whether a new signature is within the asking client's window (client-limit.ts offerSigning). */
    maySign: () => boolean,
  ): Promise<{ extension: Record<string, unknown>; servedForMs: number } | undefined>;
  /** The `extensions` entry of a paid answer: a receipt of `payer`'s settlement in `transaction`. */
  receiptExtension(params: {
    resourceUrl: string;
    payer: string;
    network: string;
    transaction: string;
  }): Promise<Record<string, unknown> | undefined>;
};

/** Distinct resource URLs whose offers are kept at once (one demo; the query string can vary). */
const MAX_CACHED_RESOURCES = 256;

/**
 * Offers and receipts for the demo's quote, or undefined (with one warn line) when the quote's
 * payTo is not the enclave's payee key.
 */
export function createOfferReceipts(params: {
  signer: Pick<SignerClient, "signX402Offer" | "signX402Receipt">;
  requirements: PaymentRequirements;
  /** The enclave's payee key's address, from its sealed state (null: an enclave without one). */
  payeeAddress: string | null;
  logger: Logger;
  now: () => Date;
}): OfferReceipts | undefined {
  const { signer, requirements, payeeAddress, logger, now } = params;
  if (payeeAddress === null || payeeAddress.toLowerCase() !== requirements.payTo.toLowerCase()) {
    logger.warn(
      { pay_to: requirements.payTo, enclave_payee: payeeAddress },
      "x402 offers and receipts are off: AGENT_X402_PAY_TO is not the enclave's payee key",
    );
    return undefined;
  }
  const payee = payeeAddress as Address;
  // An unpaid GET is anyone's to make: an offer is signed once per resource and reused for the
  // first half of its validity, so a flood of 402s costs the enclave nothing more; a flood of
  // URLs costs what the caller's `maySign` (the client's window) allows.
  const cached = new Map<string, Promise<EIP712SignedOffer | undefined>>();
  const cachedUntil = new Map<string, number>();

  const signOffer = async (resourceUrl: string): Promise<EIP712SignedOffer | undefined> => {
    const signed = await signer.signX402Offer({
      payeeAddress: payee,
      resourceUrl,
      scheme: requirements.scheme,
      network: requirements.network,
      asset: requirements.asset,
      payTo: requirements.payTo,
      amount: requirements.amount,
      validForSeconds: requirements.maxTimeoutSeconds,
    });
    if (!signed.ok) {
      logger.warn({ code: signed.error.code, reason: signed.error.reason }, "x402 offer not signed");
      return undefined;
    }
    return { format: "eip712", acceptIndex: 0, ...signed.value };
  };

  const servedUntil = (resourceUrl: string): number => cachedUntil.get(resourceUrl) ?? 0;
  const offerFor = (resourceUrl: string, maySign: () => boolean): Promise<EIP712SignedOffer | undefined> => {
    const nowMs = now().getTime();
    const held = cached.get(resourceUrl);
    if (held && servedUntil(resourceUrl) > nowMs) return held;
    // A new URL costs the enclave a signature: within the asking client's window only.
    if (!maySign()) return Promise.resolve(undefined);
    if (cached.size >= MAX_CACHED_RESOURCES) {
      cached.clear();
      cachedUntil.clear();
    }
    const signing = signOffer(resourceUrl);
    cached.set(resourceUrl, signing);
    cachedUntil.set(resourceUrl, nowMs + (requirements.maxTimeoutSeconds * 1000) / 2);
    // A refusal is not kept: the next 402 asks again.
    void signing.then((offer) => {
      if (!offer && cached.get(resourceUrl) === signing) cached.delete(resourceUrl);
    });
    return signing;
  };

  return {
    async offersExtension(resourceUrl, maySign) {
      const offer = await offerFor(resourceUrl, maySign);
      if (!offer) return undefined;
      return {
        extension: { [OFFER_RECEIPT]: { info: { offers: [offer] } } },
        servedForMs: Math.max(0, servedUntil(resourceUrl) - now().getTime()),
      };
    },
    async receiptExtension({ resourceUrl, payer, network, transaction }) {
      const signed = await signer.signX402Receipt({
        payeeAddress: payee,
        resourceUrl,
        network,
        payer,
        transaction: transaction as Hex,
      });
      if (!signed.ok) {
        logger.warn({ code: signed.error.code, reason: signed.error.reason }, "x402 receipt not signed");
        return undefined;
      }
      const receipt: EIP712SignedReceipt = { format: "eip712", ...signed.value };
      return { [OFFER_RECEIPT]: { info: { receipt } } };
    },
  };
}
