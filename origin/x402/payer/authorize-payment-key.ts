/**
 * The key of an authorization the agent named no key or nonce for (docs/x402.md#payment-identifiers):
 * derived from the agent, the resource and the quote, so asking again for the same quote answers
 * the first authorization instead of signing a second one; and the payment id that key puts in the
 * envelope when the quote declares the `payment-identifier` extension.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "../canonical-json.ts";

const PURCHASE_LABEL = "agent-wallet/x402-purchase/v1\u0000";
const DERIVED_LABEL = "agent-wallet/x402-derived-key/v2\u0000";
const PAYMENT_IDENTIFIER = "payment-identifier";

/**
 * Which purchases a request is one of (64 hex digits): the agent, the resource URL and the quote's
 * `accepts`. Not the quote's `error`, which a 402 answering a refused retry adds.
 */
export function x402Purchase(params: {
  agentId: string;
  quote: { resource: { url: string }; accepts: unknown };
}): string {
  const { agentId, quote } = params;
  return createHash("sha256")
    .update(
      PURCHASE_LABEL +
        canonicalJson({ agent: agentId, resource: quote.resource.url, accepts: quote.accepts }),
    )
    .digest("hex");
}

/**
 * `x402-` and 64 hex digits (a valid payment id itself): the key of the purchase's first
 * authorization (`after` null), or of the one after the authorization under the key `after`.
 */
export function derivedPaymentKey(purchase: string, after: string | null): string {
  const hash = createHash("sha256")
    .update(`${DERIVED_LABEL}${purchase}\u0000${after ?? ""}`)
    .digest("hex");
  return `x402-${hash}`;
}

/**
 * The quote's extensions as the envelope carries them: when the quote declares
 * `payment-identifier`, with the payment's id added to its info, as the official client's
 * `appendPaymentIdentifierToExtensions` adds one; otherwise as they came.
 */
export function withPaymentId(extensions: unknown, paymentId: string): unknown {
  if (!isObject(extensions)) return extensions;
  const declared = extensions[PAYMENT_IDENTIFIER];
  if (!isObject(declared) || !isObject(declared.info)) return extensions;
  return { ...extensions, [PAYMENT_IDENTIFIER]: { ...declared, info: { ...declared.info, id: paymentId } } };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
