import { DEFAULT_BASE_PATH } from "../shared/constants.ts";
import { err, ok, type Result } from "../shared/result.ts";

/** The worker's bindings: vars from wrangler.toml, the secret from `wrangler secret put`. */
export type EdgeBindings = {
  BASE_PATH?: string;
  ORIGIN_URL?: string;
  EDGE_SHARED_SECRET?: string;
  /**
   * `true` only for local development (`npm start` and the tests set it in Miniflare; wrangler.toml
   * never does): it lets the origin be plain http on a loopback address.
   */
  EDGE_LOCAL_DEV?: string;
};

export type EdgeConfig = {
  /** `/77` by default (docs/architecture.md): every route of the spec is mounted under it. */
  basePath: string;
  /** Scheme, host and port of the origin; the request's own path and query are kept. */
  originUrl: URL;
  /** Absent when the secret is not configured: registration then fails closed with 503. */
  edgeSharedSecret: string | undefined;
  /**
   * Plain http requests are served: local development only (the local edge listens on loopback
   * http). Deployed, a request over http is refused before anything is forwarded (index.ts).
   */
  plainHttpServed: boolean;
};

export type ParseEdgeConfigResult = Result<EdgeConfig, string[]>;

/** The origin refuses secrets shorter than 32 bytes; so does the edge. */
const MIN_SECRET_BYTES = 32;
const BASE_PATH_PATTERN = /^(\/[A-Za-z0-9._~-]+)+$/;

/**
 * Parses the bindings once at the boundary, so the worker trusts them after. A problem names the variable and
 * never echoes its value, like the origin's config.
 */
export function parseEdgeConfig(env: EdgeBindings): ParseEdgeConfigResult {
  const problems: string[] = [];
  const localDev = env.EDGE_LOCAL_DEV === "true";
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
    // A deployed worker forwarding to a loopback address reaches nothing of the operator's, and
    // plain http would carry tokens and the edge secret in clear across the internet.
    else if (!localDev && originUrl.protocol !== "https:")
      problems.push("ORIGIN_URL must be https:// outside local development (EDGE_LOCAL_DEV)");
    else if (!localDev && isLoopbackHost(originUrl.hostname))
      problems.push("ORIGIN_URL must not be a loopback address outside local development (EDGE_LOCAL_DEV)");
  }

  const secret = env.EDGE_SHARED_SECRET;
  const secretBytes = secret === undefined ? 0 : new TextEncoder().encode(secret).byteLength;
  // A short secret was once taken as unset, and every registration then failed with no hint.
  if (secretBytes > 0 && secretBytes < MIN_SECRET_BYTES)
    problems.push(`EDGE_SHARED_SECRET is shorter than ${MIN_SECRET_BYTES} bytes`);
  // Deployed, the origin cannot tell clients apart nor accept a registration without it.
  if (secretBytes === 0 && !localDev)
    problems.push(
      "EDGE_SHARED_SECRET is not set (npx wrangler secret put EDGE_SHARED_SECRET --env production)",
    );
  const edgeSharedSecret = secretBytes >= MIN_SECRET_BYTES ? secret : undefined;

  if (problems.length > 0 || !originUrl) return err(problems);
  return ok({ basePath, originUrl, edgeSharedSecret, plainHttpServed: localDev });
}

/** localhost and its subdomains, 127.0.0.0/8, ::1, and the unspecified addresses. */
function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, "");
  return (
    host === "localhost" ||
    host.endsWith(".localhost") ||
    /^127\.\d+\.\d+\.\d+$/.test(host) ||
    host === "0.0.0.0" ||
    host === "::1" ||
    host === "::" ||
    host === "::ffff:127.0.0.1" ||
    /^::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(host)
  );
}
