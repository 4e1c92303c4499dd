/**
 * The x402 `payment-identifier` extension on the payee side (docs/x402.md#payment-identifiers):
 * what the demo's 402 declares, the id a payment carries, and the fingerprint an id is bound to.
 * Pure; the binding itself is payment-ids.ts.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "../canonical-json.ts";
import { X402_REASONS, type X402Reason } from "../reasons.ts";

/** The extension's key in a quote's and a payment's `extensions`. */
export const PAYMENT_IDENTIFIER = "payment-identifier";

/** 16 to 128 letters, digits, `-` and `_`, as the extension's schema says. */
export const PAYMENT_ID_PATTERN = /^[A-Za-z0-9_-]{16,128}$/;

/**
 * What a 402 declares: an id is welcome, not required. The same object the official
 * `declarePaymentIdentifierExtension(false)` builds (a unit test compares them), so the official
 * client's `appendPaymentIdentifierToExtensions` recognises it.
 */
export const PAYMENT_IDENTIFIER_DECLARATION = {
  info: { required: false },
  schema: {
    $schema: "https://json-schema.org/draft/2020-12/schema",
    type: "object",
    properties: {
      required: { type: "boolean" },
      id: { type: "string", minLength: 16, maxLength: 128, pattern: "^[a-zA-Z0-9_-]+$" },
    },
    required: ["required"],
  },
} as const;

/** The id a payment carries: none, one, or one the extension's own rules refuse. */
export type PaymentIdOf = { paymentId?: string } | { refused: X402Reason };

/** The id in a payment envelope's `extensions["payment-identifier"].info.id`, if any. */
export function paymentIdOf(envelope: Record<string, unknown>): PaymentIdOf {
  const extensions = envelope.extensions;
  if (!isObject(extensions)) return {};
  const extension = extensions[PAYMENT_IDENTIFIER];
  if (extension === undefined) return {};
  const info = isObject(extension) ? extension.info : undefined;
  if (!isObject(info)) return { refused: X402_REASONS.invalidPaymentIdentifier };
  if (info.id === undefined) return {};
  return typeof info.id === "string" && PAYMENT_ID_PATTERN.test(info.id)
    ? { paymentId: info.id }
    : { refused: X402_REASONS.invalidPaymentIdentifier };
}

/**
 * What an id is bound to beside its payer: the resource paid for and the terms accepted. Not the
 * authorization's nonce, validity or signature: the official client signs a fresh authorization
 * for every attempt, and a retry of one logical payment must be recognised as the same request;
 * one for another resource or other terms is another request.
 */
export function paymentFingerprint(payment: { resourceUrl: string; accepted: unknown }): string {
  return createHash("sha256")
    .update(canonicalJson({ resource: payment.resourceUrl, accepted: payment.accepted }))
    .digest("hex");
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
