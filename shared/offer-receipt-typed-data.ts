/**
 * EIP-712 pieces of the x402 offer-receipt extension, EIP-712 format
 * (docs/x402.md#offers-and-receipts): the extension's two domains (no verifying contract, chain id
 * 1 whatever the payment's network, as the extension fixes them) and its Offer and Receipt types.
 * The enclave hashes these and nothing else with the payee key, a receipt for every paid request.
 * The digests are hashed from the types' fixed layout (string and uint256 fields only), as
 * eip712.ts hashes the authorization: viem's generic encoder took about a fifth of the enclave's
 * CPU in bench:x402. Runtime-neutral: no `node:` imports.
 */
import type { TypedDataDomain } from "viem";
import { concat, typedDataDigest, uintWord, utf8 } from "./eip712.ts";
import { type Hex, toHex } from "./hex.ts";
import { keccak256 } from "./keccak.ts";

/** The extension's domains: one per type, so an offer's signature can never pass for a receipt's. */
export const OFFER_DOMAIN = {
  name: "x402 offer",
  version: "1",
  chainId: 1,
} as const satisfies TypedDataDomain;
export const RECEIPT_DOMAIN = {
  name: "x402 receipt",
  version: "1",
  chainId: 1,
} as const satisfies TypedDataDomain;

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

type Field = { name: string; type: "string" | "uint256" };

/** A domain of name, version and chain id (no verifying contract), as the extension's are. */
function separatorOf(domain: { name: string; version: string; chainId: number }): Uint8Array {
  return keccak256(
    concat([
      keccak256(utf8("EIP712Domain(string name,string version,uint256 chainId)")),
      keccak256(utf8(domain.name)),
      keccak256(utf8(domain.version)),
      uintWord(BigInt(domain.chainId)),
    ]),
  );
}

/** A type's hash, from the type's own field list, so the two cannot drift apart. */
function typeHashOf(primaryType: string, fields: readonly Field[]): Uint8Array {
  return keccak256(utf8(`${primaryType}(${fields.map((field) => `${field.type} ${field.name}`).join(",")})`));
}

/** hashStruct: a string field is the hash of its UTF-8 bytes, a uint256 its word (an integer number). */
function structHash(
  typeHash: Uint8Array,
  fields: readonly Field[],
  message: Record<string, unknown>,
): Uint8Array {
  const words = fields.map(({ name, type }) => {
    const value = message[name];
    if (type === "string") {
      if (typeof value !== "string") throw new TypeError(`${name} must be a string`);
      return keccak256(utf8(value));
    }
    if (typeof value !== "number" || !Number.isInteger(value))
      throw new RangeError(`${name} must be an integer`);
    return uintWord(BigInt(value));
  });
  return keccak256(concat([typeHash, ...words]));
}

const OFFER_SEPARATOR = separatorOf(OFFER_DOMAIN);
const OFFER_TYPEHASH = typeHashOf("Offer", OFFER_TYPES.Offer);
const RECEIPT_SEPARATOR = separatorOf(RECEIPT_DOMAIN);
const RECEIPT_TYPEHASH = typeHashOf("Receipt", RECEIPT_TYPES.Receipt);

/** The digest the payee key signs for an offer. */
export function offerDigest(offer: OfferFields): Hex {
  return toHex(typedDataDigest(OFFER_SEPARATOR, structHash(OFFER_TYPEHASH, OFFER_TYPES.Offer, offer)));
}

/** The digest the payee key signs for a receipt. */
export function receiptDigest(receipt: ReceiptFields): Hex {
  return toHex(
    typedDataDigest(RECEIPT_SEPARATOR, structHash(RECEIPT_TYPEHASH, RECEIPT_TYPES.Receipt, receipt)),
  );
}
