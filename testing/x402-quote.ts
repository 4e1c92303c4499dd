/**
 * Quotes a chain-77 seller sends in its 402 body, for the tests that hand one to the payer side
 * (authorize, its check, the policies) or to the official client: native USDC through the
 * NativeTransferAuth precompile, 60 s to pay (docs/x402.md#the-demo-and-the-facilitator).
 */
import type { PaymentRequirements } from "@x402/core/types";
import { CAIP2_NETWORK, NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";

/** The `extra` the demo quotes: the EIP-712 domain, how the asset moves, and what it is. */
export const DEMO_EXTRA = {
  assetTransferMethod: "eip3009",
  paymentFlow: "authorization",
  kind: "native",
  name: "USDC",
  version: "2",
  decimals: 6,
  symbol: "USDC",
} as const;

/** The `extra` a plain @x402/hono seller of native USDC declares (the domain and the transfer method). */
export const SELLER_EXTRA = {
  assetTransferMethod: "eip3009",
  name: "USDC",
  version: "2",
  decimals: 6,
} as const;

export type SellerRequirementParams = {
  payTo: string;
  /** Units of USDC (6 decimals). */
  amount: bigint;
  /** DEMO_EXTRA unless given. */
  extra?: Record<string, unknown>;
};

export type SellerQuoteParams = SellerRequirementParams & {
  /** The resource's URL. */
  url: string;
  /** "demo resource" unless given. */
  description?: string;
};

/** A 402 body as a seller sends it, with one accepts entry. */
export type SellerQuote = {
  x402Version: number;
  error: string;
  resource: { url: string; description: string; mimeType: string };
  accepts: PaymentRequirements[];
};

/** The one requirement: `amount` units paid to `payTo` within 60 s. */
export function sellerRequirement(params: SellerRequirementParams): PaymentRequirements {
  return {
    scheme: "exact",
    network: CAIP2_NETWORK,
    amount: params.amount.toString(),
    asset: NATIVE_TRANSFER_AUTH_ADDRESS,
    payTo: params.payTo,
    maxTimeoutSeconds: 60,
    extra: { ...(params.extra ?? DEMO_EXTRA) },
  };
}

/**
 * The 402 body for `params`, its requirement's fields replaced by `overrides` (a test of a refused
 * quote sets a field to a value or a type no seller should send, so they are not typed).
 */
export function sellerQuote(params: SellerQuoteParams, overrides: Record<string, unknown> = {}): SellerQuote {
  return {
    x402Version: 2,
    error: "Payment required",
    resource: {
      url: params.url,
      description: params.description ?? "demo resource",
      mimeType: "application/json",
    },
    accepts: [{ ...sellerRequirement(params), ...overrides } as PaymentRequirements],
  };
}
