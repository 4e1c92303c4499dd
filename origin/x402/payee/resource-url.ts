/**
 * The URL an x402 quote names as its resource, `resource.url`
 * (docs/configuration.md#the-resource-an-x402-quote-names), which a payer signs for and sees: the
 * URL the client requested, never the origin's own. Behind the edge the origin's URL is private
 * (its scheme, host and port), so, first that wins:
 *   1. AGENT_PUBLIC_BASE_URL (scheme, host, port and BASE_PATH), with the path below BASE_PATH and
 *      the query of this request;
 *   2. the URL the edge says the client requested (X-svc-Request-URL), on a request carrying a
 *      valid edge secret (only the edge speaks for the client; it strips a client's copy);
 *   3. the request's own URL: a client that reached the origin directly (the local stack, tests).
 */
import type { Context } from "hono";
import { HEADER_EDGE_SECRET, HEADER_REQUEST_URL } from "../../../shared/constants.ts";
import type { EdgeSecretVerifier } from "../../http/edge-secret.ts";
import type { AppEnv } from "../../http/env.ts";

export type ResourceUrlOf = (c: Context<AppEnv>) => string;

export function createResourceUrlOf(params: {
  /** config.http.publicBaseUrl: no trailing slash, BASE_PATH included. */
  publicBaseUrl: string | undefined;
  /** config.http.basePath, which the origin's own paths start with. */
  basePath: string;
  verifyEdge: EdgeSecretVerifier | undefined;
}): ResourceUrlOf {
  const { publicBaseUrl, basePath, verifyEdge } = params;
  return (c) => {
    const own = new URL(c.req.url);
    if (publicBaseUrl !== undefined && own.pathname.startsWith(basePath)) {
      return `${publicBaseUrl}${own.pathname.slice(basePath.length)}${own.search}`;
    }
    const requested = c.req.header(HEADER_REQUEST_URL);
    if (verifyEdge && requested !== undefined && verifyEdge(c.req.header(HEADER_EDGE_SECRET))) {
      const url = httpUrl(requested);
      if (url !== undefined) return url;
    }
    return c.req.url;
  };
}

/** The URL when `text` is an absolute http(s) URL, as the URL parser spells it. */
function httpUrl(text: string): string | undefined {
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : undefined;
  } catch {
    return undefined;
  }
}

/** The public URL of a path below {base}, as the client reaches this node (resource-url.ts's rules). */
export type PublicUrlOf = (c: Context<AppEnv>, pathBelowBase: string) => string;

/**
 * The public {base} is the URL the client requested (`resourceUrlOf`) less the path this request
 * has below BASE_PATH: behind the edge, with AGENT_PUBLIC_BASE_URL, or directly alike.
 */
export function createPublicUrlOf(resourceUrlOf: ResourceUrlOf, basePath: string): PublicUrlOf {
  return (c, pathBelowBase) => {
    const requested = new URL(resourceUrlOf(c));
    const own = new URL(c.req.url).pathname;
    const below = own.startsWith(basePath) ? own.slice(basePath.length) : own;
    const base = requested.pathname.endsWith(below)
      ? requested.pathname.slice(0, requested.pathname.length - below.length)
      : basePath;
    return `${requested.origin}${base}${pathBelowBase}`;
  };
}
