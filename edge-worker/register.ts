import { BODY_DEADLINE_MS, HEADER_REGISTRATION, HEADER_REGISTRATION_IP } from "../shared/constants.ts";
import { err, ok, type Result } from "../shared/result.ts";
import type { EdgeConfig } from "./config.ts";
import { errorResponse } from "./errors.ts";
import { clientAddress, type FetchOrigin, forwardToOrigin, originHeaders } from "./proxy.ts";
import type { RegistrationBackoff } from "./registration-backoff.ts";

/** POST /agent/v1/register: the response must not be cached, whoever answers. */
const NO_STORE = { "cache-control": "no-store" } as const;
/** The most of a body the edge reads before refusing it itself (the origin takes 1,024 bytes). */
const REGISTRATION_BODY_READ_BYTES = 4_096;

/** Why the edge refused; collapsed into generic wire errors by `refusalResponse`. */
export type IngressRefusal =
  | "cross_site_origin"
  | "cross_site_fetch_site"
  | "not_json"
  | "missing_registration_header"
  | "no_client_ip"
  | "malformed_client_ip"
  | "no_edge_secret";

export type IngressCheckResult = Result<{ clientIp: string; edgeSharedSecret: string }, IngressRefusal>;

/**
 * The registration ingress checks (docs/security.md), in the order a client can
 * fix them: cross-site first (403), then the request's shape (400), then what the service lacks
 * (503). Nothing here reads the body.
 */
export function checkRegistrationIngress(request: Request, config: EdgeConfig): IngressCheckResult {
  // Browser use is same-origin; a server client may omit Origin. `Origin: null` is cross-site.
  const origin = request.headers.get("origin");
  if (origin !== null && origin.trim() !== new URL(request.url).origin) {
    return err("cross_site_origin");
  }
  const fetchSite = request.headers.get("sec-fetch-site");
  if (fetchSite !== null && !["same-origin", "none"].includes(fetchSite.trim().toLowerCase())) {
    return err("cross_site_fetch_site");
  }

  const mediaType = (request.headers.get("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (mediaType !== "application/json") return err("not_json");
  if (request.headers.get(HEADER_REGISTRATION)?.trim() !== "1") {
    return err("missing_registration_header");
  }

  // Cloudflare sets CF-Connecting-IP from the connection, overwriting anything the client sent.
  if (!request.headers.get("cf-connecting-ip")?.trim()) return err("no_client_ip");
  const clientIp = clientAddress(request);
  if (clientIp === undefined) return err("malformed_client_ip");
  if (config.edgeSharedSecret === undefined) return err("no_edge_secret");
  return ok({ clientIp, edgeSharedSecret: config.edgeSharedSecret });
}

/**
 * POST {base}/agent/v1/register: checked here, then forwarded with the client address from the
 * edge provider and the edge shared secret (docs/architecture.md). A refusal is never forwarded, so it
 * consumes no key (docs/api.md, "Error codes"); nor is an attempt from an address the origin
 * answered 429 within its Retry-After (registration-backoff.ts).
 */
export async function handleRegister(
  fetchOrigin: FetchOrigin,
  request: Request,
  config: EdgeConfig,
  requestId: string,
  backoff: RegistrationBackoff,
): Promise<Response> {
  if (request.method !== "POST") {
    return errorResponse("not_found", "no such route", requestId, NO_STORE);
  }
  const checked = checkRegistrationIngress(request, config);
  if (!checked.ok) return refusalResponse(checked.error, requestId);
  const secondsLeft = backoff.secondsLeft(checked.value.clientIp);
  if (secondsLeft !== undefined) {
    // The origin's own answer to this address, until the wait it gave is over. The body is read
    // first (a registration's is tiny; past the origin's limit the rest is dropped): answered with
    // its body unread, workerd cuts the connection while the client is still sending.
    await discardBody(request, REGISTRATION_BODY_READ_BYTES);
    return errorResponse(
      "registration_rate_limited",
      "too many registrations; retry later",
      requestId,
      { ...NO_STORE, "retry-after": String(secondsLeft) },
      { retry_after: secondsLeft },
    );
  }

  const headers = originHeaders(request, config, checked.value.clientIp);
  headers.set(HEADER_REGISTRATION_IP, checked.value.clientIp);
  const url = new URL(request.url);
  const response = await forwardToOrigin(fetchOrigin, request, {
    originUrl: config.originUrl,
    // The canonical path, whatever spelling of it the router matched.
    pathAndQuery: `${config.basePath}/agent/v1/register${url.search}`,
    headers,
    requestId,
  });
  backoff.observe(checked.value.clientIp, response);
  // A fetched response's headers are immutable; copy it to set Cache-Control.
  const copy = new Response(response.body, response);
  copy.headers.set("cache-control", NO_STORE["cache-control"]);
  return copy;
}

/**
 * One generic message per status, so a refusal does not tell which check failed beyond what the
 * client must change (the workers-oauth-provider habit, STYLE).
 */
export function refusalResponse(refusal: IngressRefusal, requestId: string): Response {
  switch (refusal) {
    case "cross_site_origin":
    case "cross_site_fetch_site":
      return errorResponse("cross_site_refused", "cross-site registration is refused", requestId, NO_STORE);
    case "not_json":
      return errorResponse("validation_failed", "Content-Type must be application/json", requestId, NO_STORE);
    case "missing_registration_header":
      return errorResponse("validation_failed", "X-SVC-Registration: 1 is required", requestId, NO_STORE);
    case "no_client_ip":
    case "malformed_client_ip":
    case "no_edge_secret":
      return errorResponse("registration_unavailable", "registration is unavailable", requestId, NO_STORE);
    default: {
      const unreachable: never = refusal;
      throw new Error(`unhandled refusal ${JSON.stringify(unreachable)}`);
    }
  }
}

/**
 * Reads and drops up to `maxBytes` of the request's body, then cancels the rest; a body that has
 * not come within the origin's body deadline is cancelled there, and the refusal goes out anyway:
 * read without one, a client that declared a body and sent none was never answered.
 */
async function discardBody(request: Request, maxBytes: number): Promise<void> {
  const reader = request.body?.getReader();
  if (!reader) return;
  const timer = setTimeout(() => {
    reader.cancel().catch(() => {});
  }, BODY_DEADLINE_MS);
  let read = 0;
  try {
    while (read <= maxBytes) {
      const chunk = await reader.read();
      if (chunk.done) return;
      read += chunk.value.byteLength;
    }
    await reader.cancel();
  } catch {
    // A client that went away, or a body cancelled at the deadline: the refusal still goes out.
  } finally {
    clearTimeout(timer);
  }
}
