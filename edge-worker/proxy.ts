import {
  HEADER_CLIENT_IP,
  HEADER_EDGE_SECRET,
  HEADER_LOCKOUT_LANE,
  HEADER_REGISTRATION_IP,
  HEADER_REQUEST_URL,
} from "../shared/constants.ts";
import type { EdgeConfig } from "./config.ts";
import { errorResponse } from "./errors.ts";
import { routedPath } from "./routed-path.ts";

/** Sends one request to the origin; the worker passes the runtime's `fetch`. */
export type FetchOrigin = (request: Request) => Promise<Response>;

export type ForwardParams = {
  originUrl: URL;
  /** The path and query to request at the origin, starting with `/`. */
  pathAndQuery: string;
  headers: Headers;
  requestId: string;
  /** The body when the edge has read it already; else the request's, streamed. */
  body?: ArrayBuffer;
};

/**
 * Only the edge may speak for the client: a client-sent edge secret, registration IP, client IP,
 * requested URL or lockout lane never reaches the origin on any route (docs/security.md).
 */
export const EDGE_ONLY_HEADERS = [
  HEADER_EDGE_SECRET,
  HEADER_REGISTRATION_IP,
  HEADER_CLIENT_IP,
  HEADER_REQUEST_URL,
  HEADER_LOCKOUT_LANE,
] as const;

/**
 * Client-supplied address headers. The origin learns the client's address only from the edge's
 * X-svc-Client-IP (and, for registration, X-svc-Registration-IP); these are removed so that no
 * later reader trusts them (client-supplied forwarded-for headers are never trusted).
 */
export const CLIENT_ADDRESS_HEADERS = [
  "x-forwarded-for",
  "x-real-ip",
  "forwarded",
  "true-client-ip",
  "cf-connecting-ip",
  "cf-connecting-ipv6",
  "cf-pseudo-ipv4",
] as const;

/**
 * The client's address from the edge provider's metadata: Cloudflare sets CF-Connecting-IP from
 * the connection, overwriting anything the client sent. Undefined when absent or no IP address.
 */
export function clientAddress(request: Request): string | undefined {
  const value = request.headers.get("cf-connecting-ip")?.trim();
  return value && looksLikeIpAddress(value) ? value : undefined;
}

/**
 * The headers to send to the origin: the client's, less the edge-only and address headers, plus
 * the client's address as the edge saw it and the edge secret (when configured), so the origin's
 * per-IP limits see each client rather than the edge (docs/security.md), and, under `{base}/x402/`,
 * the URL the client requested, so that an x402 quote names the public URL, not the origin's
 * private one.
 */
export function originHeaders(request: Request, config: EdgeConfig, clientIp: string | undefined): Headers {
  const headers = new Headers(request.headers);
  for (const name of [...EDGE_ONLY_HEADERS, ...CLIENT_ADDRESS_HEADERS]) headers.delete(name);
  if (clientIp !== undefined) headers.set(HEADER_CLIENT_IP, clientIp);
  if (namesRequestedUrl(request, config)) headers.set(HEADER_REQUEST_URL, request.url);
  if (config.edgeSharedSecret !== undefined) headers.set(HEADER_EDGE_SECRET, config.edgeSharedSecret);
  return headers;
}

/**
 * Whether the origin's answer may name the URL the client requested: only x402's routes do (a
 * quote's resource, a settlement's status pointer; origin/x402/payee/resource-url.ts). The copy
 * counts against the origin's 16 KiB of request line and headers a second time; sent on every
 * route, a gateway request with a 9 KB query, well within that budget, was answered 431
 * headers_too_large through the edge and 200 straight at the origin.
 */
function namesRequestedUrl(request: Request, config: EdgeConfig): boolean {
  // The path as the router matched it, percent-escapes decoded: `{base}/%78402/demo` is x402's too.
  return routedPath(request).startsWith(`${config.basePath}/x402/`);
}

/**
 * A syntactic check only: dotted IPv4 or an IPv6 literal. The origin does the real one; the edge
 * just never forwards something that is no address.
 */
export function looksLikeIpAddress(value: string): boolean {
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(value)) return value.split(".").every((part) => Number(part) <= 255);
  return value.length <= 45 && value.includes(":") && /^[0-9A-Fa-f:.]+$/.test(value);
}

/**
 * Forwards `request` to the origin with the given path and headers: same method, body streamed,
 * redirects handed back to the client rather than followed. An unreachable origin is a 502.
 */
export async function forwardToOrigin(
  fetchOrigin: FetchOrigin,
  request: Request,
  params: ForwardParams,
): Promise<Response> {
  // Concatenated, not resolved against the origin: a path such as `//host/x` must stay a path.
  const upstream = new Request(`${params.originUrl.origin}${params.pathAndQuery}`, {
    method: request.method,
    headers: params.headers,
    // A GET or HEAD Request cannot carry a body; the origin would not read one.
    body: request.method === "GET" || request.method === "HEAD" ? null : (params.body ?? request.body),
    redirect: "manual",
  });
  try {
    return await fetchOrigin(upstream);
  } catch {
    return errorResponse("upstream_unavailable", "the origin is unavailable", params.requestId);
  }
}

/**
 * `{base}/agent/v1/*` and `{base}/x402/*` pass through unchanged (method, path, query,
 * body, streaming); the headers as originHeaders makes them.
 */
export function passThrough(
  fetchOrigin: FetchOrigin,
  request: Request,
  config: EdgeConfig,
  requestId: string,
): Promise<Response> {
  const headers = originHeaders(request, config, clientAddress(request));
  const url = new URL(request.url);
  return forwardToOrigin(fetchOrigin, request, {
    originUrl: config.originUrl,
    pathAndQuery: url.pathname + url.search,
    headers,
    requestId,
  });
}
