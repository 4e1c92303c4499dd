/**
 * EIP-712 pieces of the x402 offer-receipt extension, EIP-712 format
 * (docs/x402.md#offers-and-receipts): the extension's two domains (no verifying contract, chain id
 * 1 whatever the payment's network, as the extension fixes them) and its Offer and Receipt types.
 * The enclave hashes these and nothing else with the payee key. Runtime-neutral: no `node:` imports.
 */
import { hashTypedData, type TypedDataDomain } from "viem";
import type { Hex } from "./hex.ts";

/** The extension's domains: one per type, so an offer's signature can never pass for a receipt's. */
export const OFFER_DOMAIN: TypedDataDomain = { name: "x402 offer", version: "1", chainId: 1 };
export const RECEIPT_DOMAIN: TypedDataDomain = { name: "x402 receipt", version: "1", chainId: 1 };

export const OFFER_TYPES = {
  Offer: [
    { name: "version", type: "uint256" },
    { name: "resourceUrl", type: "string" },
    { name: "scheme", type: "string" },
    { name: "network", type: "string" },
    { name: "asset", type: "string" },
    { name: "payTo", type: "string" },
    { name: "amount", type: "string" },
    { name: "validUntil", type: "uint256" },
  ],
} as const;

export const RECEIPT_TYPES = {
  Receipt: [
    { name: "version", type: "uint256" },
    { name: "network", type: "string" },
    { name: "resourceUrl", type: "string" },
    { name: "payer", type: "string" },
    { name: "issuedAt", type: "uint256" },
    { name: "transaction", type: "string" },
  ],
} as const;

/** An offer's fields, as the extension's EIP-712 payload names them. */
export type OfferFields = {
  version: number;
  resourceUrl: string;
  scheme: string;
  network: string;
  asset: string;
  payTo: string;
  amount: string;
  validUntil: number;
};

/** A receipt's fields, as the extension's EIP-712 payload names them. */
export type ReceiptFields = {
  version: number;
  network: string;
  resourceUrl: string;
  payer: string;
  issuedAt: number;
  transaction: string;
};

/** The digest the payee key signs for an offer. */
export function offerDigest(offer: OfferFields): Hex {
  return hashTypedData({
    domain: OFFER_DOMAIN,
    types: OFFER_TYPES,
    primaryType: "Offer",
    message: { ...offer, version: BigInt(offer.version), validUntil: BigInt(offer.validUntil) },
  }) as Hex;
}

/** The digest the payee key signs for a receipt. */
export function receiptDigest(receipt: ReceiptFields): Hex {
  return hashTypedData({
    domain: RECEIPT_DOMAIN,
    types: RECEIPT_TYPES,
    primaryType: "Receipt",
    message: { ...receipt, version: BigInt(receipt.version), issuedAt: BigInt(receipt.issuedAt) },
  }) as Hex;
}
