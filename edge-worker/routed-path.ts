import { getPath } from "hono/utils/url";

/**
 * The path the edge routes on is the path it forwards: the URL parser's, which resolves `.` and `..`
 * segments, percent-encoded ones (`%2e%2e`) too, as the handlers' `new URL(request.url)` does. Routed
 * on the path as the client spelled it, `{base}/agent/v1/%2e%2e/%2e%2e/admin/…` matched the gateway's
 * routes and was forwarded as `{base}/admin/…` (docs/security.md). A zone's URL normalization may
 * resolve such a path before the worker sees it; the allowlist does not rest on a zone setting.
 */
export function routedPath(request: Request): string {
  const parsed = new URL(request.url).href;
  return getPath(parsed === request.url ? request : new Request(parsed));
}
