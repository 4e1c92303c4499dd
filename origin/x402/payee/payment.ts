/**
 * Decoding and shape checks of an x402 payment: the Base64 JSON envelope in PAYMENT-SIGNATURE
 * (docs/x402.md#the-demo-and-the-facilitator). Parsed once here; verify.ts then trusts the types. A
 * defect is a reason, never an exception (a failed verify is data, not an exception).
 */
import type { Address } from "viem";
import type { TransferWithAuthorizationMessage } from "../../../shared/eip712.ts";
import type { Hex } from "../../../shared/hex.ts";
import { MAX_JSON_DEPTH, nestsAtMost } from "../../../shared/json-depth.ts";
import { err, ok, type Result } from "../../../shared/result.ts";
import { X402_REASONS, type X402Reason } from "../reasons.ts";

/** The signed TransferWithAuthorization a payment carries (its EIP-712 message). */
export type Authorization = TransferWithAuthorizationMessage;

/** An envelope whose shape is sound; its claims are not checked yet. */
export type PaymentEnvelope = {
  x402Version: number;
  resource: { url: string };
  /** The chosen requirement, as the client copied it. */
  accepted: Record<string, unknown>;
  authorization: Authorization;
  signature: Hex;
  /** The envelope as received, for hashing. */
  raw: Record<string, unknown>;
};

/** Why a payment is refused, and who its payer is once the envelope names one. */
export type PaymentRefusal = { code: X402Reason; payer?: string };

export type Parsed<T> = Result<T, PaymentRefusal>;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const UINT = /^(0|[1-9][0-9]{0,77})$/;
const NONCE = /^0x[0-9a-fA-F]{64}$/;
const SIGNATURE = /^0x[0-9a-fA-F]+$/;

/** PAYMENT-SIGNATURE header value → envelope. */
export function decodePaymentHeader(header: string): Parsed<PaymentEnvelope> {
  const trimmed = header.trim();
  if (trimmed === "" || trimmed.length % 4 === 1 || !BASE64.test(trimmed)) {
    return err({ code: X402_REASONS.invalidPayloadBase64 });
  }
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(trimmed, "base64").toString("utf8"));
  } catch {
    return err({ code: X402_REASONS.invalidPayloadJson });
  }
  // The settler hashes the payload by a recursive walk (canonical-json.ts), which thousands of
  // levels overflow; the facilitator's routes check their bodies the same way.
  if (!nestsAtMost(json, MAX_JSON_DEPTH)) return err({ code: X402_REASONS.invalidPayload });
  return parseEnvelope(json);
}

/** A JSON value (a header's, or a facilitator body's paymentPayload) → envelope. */
export function parseEnvelope(json: unknown): Parsed<PaymentEnvelope> {
  if (!isObject(json)) return err({ code: X402_REASONS.invalidPayloadJson });
  // A missing resource.url or accepted is `invalid_payload`
  // (docs/x402.md#the-demo-and-the-facilitator).
  const resource = json.resource;
  if (!isObject(resource) || typeof resource.url !== "string" || resource.url === "") {
    return err({ code: X402_REASONS.invalidPayload });
  }
  if (!isObject(json.accepted)) return err({ code: X402_REASONS.invalidPayload });
  if (typeof json.x402Version !== "number") return err({ code: X402_REASONS.invalidX402Version });
  const payload = json.payload;
  const authorization = isObject(payload) ? payload.authorization : undefined;
  const signature = isObject(payload) ? payload.signature : undefined;
  if (!isObject(authorization) || typeof signature !== "string") {
    return err({ code: X402_REASONS.unsupportedPayloadType });
  }
  const { from, to, value, validAfter, validBefore, nonce } = authorization;
  const fields =
    isString(from, ADDRESS) &&
    isString(to, ADDRESS) &&
    isString(value, UINT) &&
    isString(validAfter, UINT) &&
    isString(validBefore, UINT) &&
    isString(nonce, NONCE);
  if (!fields) return err({ code: X402_REASONS.unsupportedPayloadType });
  const payer = (from as string).toLowerCase();
  if (!SIGNATURE.test(signature) || signature.length !== 132) {
    return err({ code: X402_REASONS.signatureUnparsable, payer });
  }
  return ok({
    x402Version: json.x402Version,
    resource: { url: resource.url },
    accepted: json.accepted,
    authorization: {
      from: payer as Address,
      to: (to as string).toLowerCase() as Address,
      value: BigInt(value as string),
      validAfter: BigInt(validAfter as string),
      validBefore: BigInt(validBefore as string),
      nonce: (nonce as string).toLowerCase() as Hex,
    },
    signature: signature.toLowerCase() as Hex,
    raw: json,
  });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isString(value: unknown, pattern: RegExp): boolean {
  return typeof value === "string" && pattern.test(value);
}
