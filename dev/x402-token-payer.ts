/**
 * An agent that holds only its bearer token pays an x402 resource (docs/x402.md): the unpaid GET
 * and its 402 quote, the gateway's authorization of it (the enclave signs; the agent has no key),
 * and the paid retry with the `PAYMENT-SIGNATURE` it was given. Used by `npm run demo:x402` and its test.
 */
import { randomBytes } from "node:crypto";
import type { X402AuthorizeResponse } from "../shared/gateway-schemas.ts";

/** The settlement the resource reports in `PAYMENT-RESPONSE` (x402 version 2). */
export type PaymentResponse = {
  success: boolean;
  transaction?: string;
  network?: string;
  payer?: string;
  errorReason?: string;
};

export type TokenPaymentResult = {
  quote: { amount: string; payTo: string; resource: string };
  authorization: X402AuthorizeResponse;
  status: number;
  body: string;
  settlement: PaymentResponse | undefined;
};

export type PayWithTokenParams = {
  /** The service base with the chain segment, e.g. http://127.0.0.1:8787/77. */
  base: string;
  token: string;
  /** The paid resource; {base}/x402/demo by default. */
  resourceUrl?: string;
  /** Told of each step, in words. */
  step?: (line: string) => void;
};

export async function payWithToken(params: PayWithTokenParams): Promise<TokenPaymentResult> {
  const step = params.step ?? (() => {});
  const url = params.resourceUrl ?? `${params.base}/x402/demo`;

  step(`GET ${url}`);
  const unpaid = await fetch(url);
  const quoteText = await unpaid.text();
  if (unpaid.status !== 402) throw new Error(`expected 402 from ${url}, got ${unpaid.status}: ${quoteText}`);
  const quote = JSON.parse(quoteText) as {
    resource?: { url?: string };
    accepts?: Array<{ amount?: string; payTo?: string; network?: string }>;
  };
  const offer = quote.accepts?.[0];
  step(`  402 Payment Required: ${offer?.amount} units to ${offer?.payTo} on ${offer?.network}`);

  const nonce = `0x${randomBytes(32).toString("hex")}`;
  step(`POST ${params.base}/agent/v1/x402/authorize (nonce ${nonce})`);
  const authorized = await fetch(`${params.base}/agent/v1/x402/authorize`, {
    method: "POST",
    headers: { authorization: `Bearer ${params.token}`, "content-type": "application/json" },
    body: JSON.stringify({ payment_required: quote, nonce }),
  });
  const authorizationText = await authorized.text();
  if (authorized.status !== 200) {
    throw new Error(`authorize answered ${authorized.status}: ${authorizationText}`);
  }
  const authorization = JSON.parse(authorizationText) as X402AuthorizeResponse;
  step(`  200: action ${authorization.action_id}, valid before ${authorization.valid_before}`);

  step(`GET ${url} with PAYMENT-SIGNATURE`);
  const paid = await fetch(url, { headers: { "payment-signature": authorization.payment_signature } });
  const body = await paid.text();
  const header = paid.headers.get("payment-response");
  const settlement = header
    ? (JSON.parse(Buffer.from(header, "base64").toString("utf8")) as PaymentResponse)
    : undefined;
  step(
    `  ${paid.status}: settlement ${settlement?.success ? "succeeded" : "did not succeed"}${settlement?.transaction ? `, transaction ${settlement.transaction}` : ""}${settlement?.errorReason ? ` (${settlement.errorReason})` : ""}`,
  );
  return {
    quote: { amount: offer?.amount ?? "", payTo: offer?.payTo ?? "", resource: quote.resource?.url ?? url },
    authorization,
    status: paid.status,
    body,
    settlement,
  };
}
