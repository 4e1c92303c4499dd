import { HEADER_EDGE_SECRET, HEADER_REGISTRATION_IP } from "../shared/constants.ts";
import { errorResponse } from "./errors.ts";

/** Sends one request to the origin; the worker passes the runtime's `fetch`. */
export type FetchOrigin = (request: Request) => Promise<Response>;

export type ForwardParams = {
  originUrl: URL;
  /** The path and query to request at the origin, starting with `/`. */
  pathAndQuery: string;
  headers: Headers;
  requestId: string;
};

/**
 * Only the edge may speak for registration: a client-sent edge secret or registration IP never
 * reaches the origin on any route (SPEC "Registration ingress rules").
 */
export const EDGE_ONLY_HEADERS = [HEADER_EDGE_SECRET, HEADER_REGISTRATION_IP] as const;

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
    body: request.method === "GET" || request.method === "HEAD" ? null : request.body,
    redirect: "manual",
  });
  try {
    return await fetchOrigin(upstream);
  } catch {
    return errorResponse("upstream_unavailable", "the origin is unavailable", params.requestId);
  }
}

/**
 * DESIGN §1: `{base}/agent/v1/*` and `{base}/x402/*` pass through unchanged (method, path, query,
 * headers, body, streaming) except for the edge-only headers.
 */
export function passThrough(
  fetchOrigin: FetchOrigin,
  request: Request,
  originUrl: URL,
  requestId: string,
): Promise<Response> {
  const headers = new Headers(request.headers);
  for (const name of EDGE_ONLY_HEADERS) headers.delete(name);
  const url = new URL(request.url);
  return forwardToOrigin(fetchOrigin, request, {
    originUrl,
    pathAndQuery: url.pathname + url.search,
    headers,
    requestId,
  });
}
