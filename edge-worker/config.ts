import { DEFAULT_BASE_PATH } from "../shared/constants.ts";

/** The worker's bindings: vars from wrangler.toml, the secret from `wrangler secret put`. */
export type EdgeBindings = {
  BASE_PATH?: string;
  ORIGIN_URL?: string;
  EDGE_SHARED_SECRET?: string;
};

export type EdgeConfig = {
  /** `/77` by default (DESIGN §1): every route of the spec is mounted under it. */
  basePath: string;
  /** Scheme, host and port of the origin; the request's own path and query are kept. */
  originUrl: URL;
  /** Absent when the secret is not configured: registration then fails closed with 503. */
  edgeSharedSecret: string | undefined;
};

export type ParseEdgeConfigResult = { ok: true; config: EdgeConfig } | { ok: false; problems: string[] };

/** DESIGN §7: the origin refuses secrets shorter than 32 bytes, so the edge treats them as unset. */
const MIN_SECRET_BYTES = 32;
const BASE_PATH_PATTERN = /^(\/[A-Za-z0-9._~-]+)+$/;

/**
 * Parses the bindings once at the boundary (STYLE "Habits" 1). A problem names the variable and
 * never echoes its value, like the origin's config.
 */
export function parseEdgeConfig(env: EdgeBindings): ParseEdgeConfigResult {
  const problems: string[] = [];
  const basePath = env.BASE_PATH ?? DEFAULT_BASE_PATH;
  if (!BASE_PATH_PATTERN.test(basePath)) problems.push("BASE_PATH must look like /77");

  let originUrl: URL | undefined;
  try {
    originUrl = new URL(env.ORIGIN_URL ?? "");
  } catch {
    problems.push("ORIGIN_URL must be an absolute http(s) URL");
  }
  if (originUrl) {
    const originOnly =
      (originUrl.protocol === "http:" || originUrl.protocol === "https:") &&
      originUrl.pathname === "/" &&
      originUrl.search === "" &&
      originUrl.hash === "" &&
      originUrl.username === "" &&
      originUrl.password === "";
    // The request's path already carries BASE_PATH, so the origin URL names a host and nothing more.
    if (!originOnly)
      problems.push("ORIGIN_URL must be scheme://host[:port] with no path, query or credentials");
  }

  const secret = env.EDGE_SHARED_SECRET;
  const edgeSharedSecret =
    secret !== undefined && new TextEncoder().encode(secret).byteLength >= MIN_SECRET_BYTES
      ? secret
      : undefined;

  if (problems.length > 0 || !originUrl) return { ok: false, problems };
  return { ok: true, config: { basePath, originUrl, edgeSharedSecret } };
}
