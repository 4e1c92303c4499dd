/**
 * POST {base}/x402/facilitator/verify and /settle: forwarded as the rest of `/x402/*` is, except
 * that a signed payment the origin answered 429 (its payer's window, its address's) is answered
 * that same 429 here, to the same client address at the same route, until its Retry-After
 * (remembered-refusals.ts). Replaying one signed payment is the cheapest flood there is, and
 * the origin could refuse it only after parsing it and recovering its signer. A payment is known by
 * its signature, which binds every field of its authorization, so a body respaced or reordered
 * around the same signature is the same payment and gets the same answer. Bodies without a
 * Content-Length of at most MAX_BODY_BYTES are streamed through unread, and bodies that carry no
 * signature are forwarded as read. A body read here that has not arrived within the origin's body
 * deadline is answered 408 here, as the origin would (read-body.ts).
 */
import type { EdgeConfig } from "./config.ts";
import { clientAddress, type FetchOrigin, forwardToOrigin, originHeaders, passThrough } from "./proxy.ts";
import { bodyTimedOut, readBodyWithin } from "./read-body.ts";
import { RememberedRefusals, refusalSeconds } from "./remembered-refusals.ts";

/** The origin reads no more of a verify or settle body (origin/x402/payee/facilitator.ts). */
export const MAX_BODY_BYTES = 64 * 1024;
/** Payments remembered at once: a refusal body is a few hundred bytes, so a few megabytes at most. */
export const REMEMBERED_PAYMENTS = 10_000;

/** The origin's refusal as it answered it, to be answered again. */
export type OriginRefusal = { contentType: string; body: string };

export type FacilitatorRefusals = RememberedRefusals<OriginRefusal>;

export function createFacilitatorRefusals(now?: () => number): FacilitatorRefusals {
  return new RememberedRefusals<OriginRefusal>(REMEMBERED_PAYMENTS, now);
}

export async function handleFacilitator(
  fetchOrigin: FetchOrigin,
  request: Request,
  config: EdgeConfig,
  requestId: string,
  refusals: FacilitatorRefusals,
): Promise<Response> {
  const clientIp = clientAddress(request);
  const length = Number(request.headers.get("content-length") ?? Number.NaN);
  if (clientIp === undefined || !(length > 0 && length <= MAX_BODY_BYTES)) {
    return passThrough(fetchOrigin, request, config, requestId);
  }
  const body = await readBodyWithin(request);
  if (body === undefined) return bodyTimedOut(requestId);
  const url = new URL(request.url);
  const signature = signatureOf(body);
  const key = signature === undefined ? undefined : `${clientIp} ${url.pathname} ${signature}`;
  const known = key === undefined ? undefined : refusals.lookup(key);
  if (known !== undefined) {
    return new Response(known.value.body, {
      status: 429,
      headers: {
        "content-type": known.value.contentType,
        "retry-after": String(known.secondsLeft),
        "x-request-id": requestId,
      },
    });
  }
  const response = await forwardToOrigin(fetchOrigin, request, {
    originUrl: config.originUrl,
    pathAndQuery: url.pathname + url.search,
    headers: originHeaders(request, config, clientIp),
    requestId,
    body,
  });
  const seconds = refusalSeconds(response);
  if (key === undefined || seconds === undefined) return response;
  const text = await response.text();
  refusals.remember(key, seconds, { contentType: response.headers.get("content-type") ?? "", body: text });
  return new Response(text, response);
}

/** The payment's signature (`paymentPayload.payload.signature`), lower-cased, or undefined. */
function signatureOf(body: ArrayBuffer): string | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder().decode(body));
  } catch {
    return undefined;
  }
  const signature = field(field(field(parsed, "paymentPayload"), "payload"), "signature");
  // 65 bytes in hex, as the origin parses it (origin/x402/payee/payment.ts); anything else is junk.
  return typeof signature === "string" && /^0x[0-9a-fA-F]{130}$/.test(signature)
    ? signature.toLowerCase()
    : undefined;
}

function field(value: unknown, name: string): unknown {
  return typeof value === "object" && value !== null ? (value as Record<string, unknown>)[name] : undefined;
}
