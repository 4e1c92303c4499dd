/**
 * The offer and receipt digests (offer-receipt-typed-data.ts), hashed from the types' fixed
 * layout, held to viem's generic EIP-712 encoder: the digests the official extension's verifier
 * recomputes from the same domains and types.
 */
import { hashTypedData } from "viem";
import { describe, expect, it } from "vitest";
import {
  OFFER_DOMAIN,
  OFFER_TYPES,
  type OfferFields,
  offerDigest,
  RECEIPT_DOMAIN,
  RECEIPT_TYPES,
  type ReceiptFields,
  receiptDigest,
} from "./offer-receipt-typed-data.ts";

const viemOffer = (offer: OfferFields): string =>
  hashTypedData({
    domain: OFFER_DOMAIN,
    types: OFFER_TYPES,
    primaryType: "Offer",
    message: { ...offer, version: BigInt(offer.version), validUntil: BigInt(offer.validUntil) },
  });

const viemReceipt = (receipt: ReceiptFields): string =>
  hashTypedData({
    domain: RECEIPT_DOMAIN,
    types: RECEIPT_TYPES,
    primaryType: "Receipt",
    message: { ...receipt, version: BigInt(receipt.version), issuedAt: BigInt(receipt.issuedAt) },
  });

const pieces = ["", "a", "https://example.com/77/x402/demo?q=1", "é", "支付", "🙂", "0x", "eip155:77", " "];
const randomText = (): string =>
  Array.from(
    { length: Math.floor(Math.random() * 6) },
    () => pieces[Math.floor(Math.random() * pieces.length)],
  )
    .join("")
    .repeat(1 + Math.floor(Math.random() * 40));
const integers = [0, 1, 2, 1_796_000_000, Number.MAX_SAFE_INTEGER, 2 ** 60];
const randomInteger = (): number =>
  Math.random() < 0.5
    ? integers[Math.floor(Math.random() * integers.length)]!
    : Math.floor(Math.random() * 2 ** 40);

describe("offer and receipt digests", () => {
  it("equal viem's EIP-712 digests over 300 random offers and receipts", () => {
    for (let i = 0; i < 300; i++) {
      const offer: OfferFields = {
        version: randomInteger(),
        resourceUrl: randomText(),
        scheme: randomText(),
        network: randomText(),
        asset: randomText(),
        payTo: randomText(),
        amount: randomText(),
        validUntil: randomInteger(),
      };
      expect(offerDigest(offer)).toBe(viemOffer(offer));
      const receipt: ReceiptFields = {
        version: randomInteger(),
        network: randomText(),
        resourceUrl: randomText(),
        payer: randomText(),
        issuedAt: randomInteger(),
        transaction: randomText(),
      };
      expect(receiptDigest(receipt)).toBe(viemReceipt(receipt));
    }
  });

  it("keeps an offer's digest apart from a receipt's over the same words", () => {
    const receipt: ReceiptFields = {
      version: 1,
      network: "eip155:77",
      resourceUrl: "https://example.com/77/x402/demo",
      payer: "0x1111111111111111111111111111111111111111",
      issuedAt: 1_796_000_000,
      transaction: `0x${"ab".repeat(32)}`,
    };
    expect(receiptDigest(receipt)).toBe(viemReceipt(receipt));
    expect(receiptDigest({ ...receipt, payer: receipt.payer.toUpperCase() })).not.toBe(
      receiptDigest(receipt),
    );
  });

  it("refuses a number no uint256 holds, as viem's encoder does", () => {
    const offer: OfferFields = {
      version: 1,
      resourceUrl: "u",
      scheme: "exact",
      network: "eip155:77",
      asset: "a",
      payTo: "p",
      amount: "1",
      validUntil: 1,
    };
    for (const validUntil of [-1, 1.5, Number.NaN]) {
      expect(() => offerDigest({ ...offer, validUntil })).toThrow();
      expect(() => viemOffer({ ...offer, validUntil })).toThrow();
    }
  });
});
