/**
 * A seller as the official x402 packages make one (docs/x402.md): `@x402/hono`'s payment middleware
 * over `@x402/core`'s resource server with `@x402/evm`'s exact scheme, selling one JSON article at
 * `GET /article` on chain 77, and declaring the payment-identifier extension as docs/x402.md
 * advises a seller to.
 */
import { type FacilitatorClient, x402ResourceServer } from "@x402/core/server";
import { ExactEvmScheme as ExactEvmServer } from "@x402/evm/exact/server";
import { declarePaymentIdentifierExtension, PAYMENT_IDENTIFIER } from "@x402/extensions/payment-identifier";
import { paymentMiddleware } from "@x402/hono";
import { Hono } from "hono";
import type { Address } from "viem";
import { CAIP2_NETWORK, NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";
import { SELLER_EXTRA } from "./x402-quote.ts";

/** What the article answers once paid. */
export const PAID_ARTICLE = { article: "paid for" } as const;

export function officialArticleSeller(params: {
  facilitator: FacilitatorClient;
  payTo: Address;
  /** The price in USDC units. */
  amount: bigint;
  /** The quote's maxTimeoutSeconds: how long an authorization for it may stay valid. */
  maxTimeoutSeconds: number;
}): Hono {
  const server = new x402ResourceServer(params.facilitator).register(CAIP2_NETWORK, new ExactEvmServer());
  const accepts = {
    scheme: "exact",
    network: CAIP2_NETWORK,
    payTo: params.payTo,
    price: {
      amount: params.amount.toString(),
      asset: NATIVE_TRANSFER_AUTH_ADDRESS,
      extra: { ...SELLER_EXTRA },
    },
    maxTimeoutSeconds: params.maxTimeoutSeconds,
  } as const;
  const seller = new Hono();
  seller.use(
    paymentMiddleware(
      {
        "GET /article": {
          accepts,
          description: "an article",
          mimeType: "application/json",
          extensions: { [PAYMENT_IDENTIFIER]: declarePaymentIdentifierExtension(false) },
        },
      },
      server,
    ),
  );
  // The middleware runs the handler before it settles, and answers 402 instead when the settle fails.
  seller.get("/article", (c) => c.json(PAID_ARTICLE));
  return seller;
}
