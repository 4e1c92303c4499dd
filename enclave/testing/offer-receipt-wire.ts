/**
 * The enclave's signed offers and receipts (sign_x402_offer, sign_x402_receipt: snake_case wire) as
 * the offer-receipt extension carries them, for the official verifiers of @x402/extensions.
 */
import type { EIP712SignedOffer, EIP712SignedReceipt } from "@x402/extensions/offer-receipt";

export function asOffer(result: Record<string, unknown>): EIP712SignedOffer {
  const p = result.payload as Record<string, unknown>;
  return {
    format: "eip712",
    payload: {
      version: p.version as number,
      resourceUrl: p.resource_url as string,
      scheme: p.scheme as string,
      network: p.network as string,
      asset: p.asset as string,
      payTo: p.pay_to as string,
      amount: p.amount as string,
      validUntil: p.valid_until as number,
    },
    signature: result.signature as string,
  };
}

export function asReceipt(result: Record<string, unknown>): EIP712SignedReceipt {
  const p = result.payload as Record<string, unknown>;
  return {
    format: "eip712",
    payload: {
      version: p.version as number,
      network: p.network as string,
      resourceUrl: p.resource_url as string,
      payer: p.payer as string,
      issuedAt: p.issued_at as number,
      transaction: p.transaction as string,
    },
    signature: result.signature as string,
  };
}
