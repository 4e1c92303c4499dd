/**
 * The x402 version 2 payment envelope (docs/x402.md#the-demo-and-the-facilitator) as the official
 * client (`@x402/core`'s x402Client with `@x402/evm`'s exact scheme, what `@x402/fetch` sends)
 * writes it for the same quote: keys in its order (x402Version, payload, extensions, resource,
 * accepted), validAfter "0", `resource`, `extensions` and `accepted` copied from the quote as the
 * agent sent them. Addresses are copied as given, where the official client checksums them: `to` is
 * the quote's payTo exactly as the quote wrote it, `from` the wallet as the service writes it (its
 * `assigned_wallet`). Its Base64 is the `PAYMENT-SIGNATURE` header value. Only the authorization
 * and its signature are stored (authorize-repository.ts); a repeat, whose request hash binds the
 * copied parts byte for byte, builds the same envelope from its own body.
 */
import type { Hex } from "../../../shared/hex.ts";

export type PaymentAuthorization = {
  from: string;
  to: string;
  value: string;
  validAfter: string;
  validBefore: string;
  nonce: string;
};

export type PaymentEnvelope = {
  x402Version: 2;
  payload: { authorization: PaymentAuthorization; signature: string };
  extensions?: unknown;
  resource: unknown;
  accepted: unknown;
};

/** The signed authorization as the envelope spells it: addresses as given, validAfter "0". */
export function paymentAuthorization(params: {
  /** The agent's wallet, as its `assigned_wallet` is written. */
  from: string;
  /** The quote's payTo, as the quote wrote it. */
  to: string;
  /** The amount string as quoted. */
  value: string;
  validBefore: bigint;
  nonce: Hex;
}): PaymentAuthorization {
  return {
    from: params.from,
    to: params.to,
    value: params.value,
    validAfter: "0",
    validBefore: params.validBefore.toString(),
    nonce: params.nonce,
  };
}

export type BuildPaymentEnvelopeParams = {
  /** The quote's `resource`, `extensions` and chosen `accepts` entry, as the agent sent them. */
  resource: unknown;
  extensions: unknown;
  accepted: unknown;
  authorization: PaymentAuthorization;
  signature: string;
};

/**
 * The envelope; the same bytes for the same parts. The authorization's keys are written in their
 * fixed order here, whatever order the object given has (a stored one comes back from jsonb,
 * which keeps no key order).
 */
export function buildPaymentEnvelope(params: BuildPaymentEnvelopeParams): PaymentEnvelope {
  const { from, to, value, validAfter, validBefore, nonce } = params.authorization;
  return {
    x402Version: 2,
    payload: {
      authorization: { from, to, value, validAfter, validBefore, nonce },
      signature: params.signature,
    },
    // Absent from the JSON when the quote had none, as with the official client.
    extensions: params.extensions,
    resource: params.resource,
    accepted: params.accepted,
  };
}

/** The `PAYMENT-SIGNATURE` header value: Base64 of the UTF-8 JSON (x402 core's encoding). */
export function encodePaymentSignature(envelope: PaymentEnvelope): string {
  return Buffer.from(JSON.stringify(envelope), "utf8").toString("base64");
}

/** The envelope back from a header value this module wrote (a stored answer, never client input). */
export function decodeStoredPaymentSignature(header: string): PaymentEnvelope {
  return JSON.parse(Buffer.from(header, "base64").toString("utf8")) as PaymentEnvelope;
}
