/**
 * Requests a page of another origin makes the operator's browser send to the console
 * (docs/operations.md#the-operator-console-and-metrics). Such a page reads no answer and sends no
 * token, but its requests come from the operator's own address: counted as failed admin
 * authentications, two dozen image tags would lock the operator out of the console for as long as
 * the page stays open. The browser names where a request comes from (Sec-Fetch-Site); what another
 * site, or another origin of this one, sent is refused before any credential is checked. A client
 * that is not a browser sends no such header and is let through.
 */
import type { MiddlewareHandler } from "hono";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";

/**
 * Whether the route refuses a request of another origin: the console's API and the metrics. The
 * console's page (`GET /admin/agents`) is reached by links and bookmarks and holds no data.
 */
export function refusesCrossSite(method: string, path: string): boolean {
  if (path === "/metrics") return true;
  return path.startsWith("/admin/agents/") && !(method.toLowerCase() === "get" && path === "/admin/agents");
}

/**
 * 403 cross_site_refused for a request a browser marks as sent by a page of another origin, on the
 * routes refusesCrossSite names (`basePath` is taken off the request's path first).
 */
export function refuseCrossSite(basePath: string): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const site = c.req.header("sec-fetch-site");
    const path = c.req.path.startsWith(basePath) ? c.req.path.slice(basePath.length) : c.req.path;
    if ((site === "cross-site" || site === "same-site") && refusesCrossSite(c.req.method, path))
      throw new AppError(
        "cross_site_refused",
        "the console answers its own page only: this request was sent by a page of another origin",
      );
    await next();
  };
}
