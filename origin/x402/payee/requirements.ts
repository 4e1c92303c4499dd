/**
 * The demo resource's quote (docs/x402.md#the-demo-and-the-facilitator, and its amount and
 * validity: docs/api.md#the-demo-quotes-amount): one `exact` requirement on eip155:77 in the
 * precompile's native USDC, with every `extra` field an exact-scheme client signs by.
 */
import {
  CAIP2_NETWORK,
  EIP712_DOMAIN_NAME,
  EIP712_DOMAIN_VERSION,
  NATIVE_DECIMALS,
  NATIVE_SYMBOL,
  NATIVE_TRANSFER_AUTH_ADDRESS,
} from "../../../shared/constants.ts";
import { demoMaxTimeoutSeconds } from "../../config.ts";
import { PAYMENT_IDENTIFIER, PAYMENT_IDENTIFIER_DECLARATION } from "./payment-identifier.ts";

export const X402_VERSION = 2;

export type PaymentRequirements = {
  scheme: "exact";
  network: string;
  asset: string;
  amount: string;
  payTo: string;
  maxTimeoutSeconds: number;
  extra: {
    assetTransferMethod: "eip3009";
    paymentFlow: "authorization";
    kind: "native";
    name: string;
    version: string;
    decimals: number;
    symbol: string;
  };
};

export type ResourceInfo = { url: string; mimeType: string; description: string };

export type PaymentRequired = {
  x402Version: 2;
  error?: string;
  resource: ResourceInfo;
  accepts: PaymentRequirements[];
  extensions: Record<string, unknown>;
};

/**
 * The one requirement this service accepts: the configured amount to the configured payTo, valid no
 * longer than the node signs (AGENT_X402_MAX_TIMEOUT_SECONDS).
 */
export function demoRequirements(terms: {
  amountUnits: bigint;
  payTo: string;
  maxTimeoutSeconds: number;
}): PaymentRequirements {
  return {
    scheme: "exact",
    network: CAIP2_NETWORK,
    asset: NATIVE_TRANSFER_AUTH_ADDRESS.toLowerCase(),
    amount: terms.amountUnits.toString(),
    payTo: terms.payTo,
    maxTimeoutSeconds: demoMaxTimeoutSeconds(terms.maxTimeoutSeconds),
    extra: {
      assetTransferMethod: "eip3009",
      paymentFlow: "authorization",
      kind: "native",
      name: EIP712_DOMAIN_NAME,
      version: EIP712_DOMAIN_VERSION,
      decimals: NATIVE_DECIMALS,
      symbol: NATIVE_SYMBOL,
    },
  };
}

export function paymentRequired(
  resource: ResourceInfo,
  requirements: PaymentRequirements,
  error?: string,
): PaymentRequired {
  return {
    x402Version: X402_VERSION,
    ...(error ? { error } : {}),
    resource,
    accepts: [requirements],
    // A payment id is welcome (docs/x402.md#payment-identifiers).
    extensions: { [PAYMENT_IDENTIFIER]: PAYMENT_IDENTIFIER_DECLARATION },
  };
}

/** Base64 of the JSON, as the PAYMENT-REQUIRED and PAYMENT-RESPONSE headers carry it. */
export function encodeHeader(value: unknown): string {
  return Buffer.from(JSON.stringify(value), "utf8").toString("base64");
}
