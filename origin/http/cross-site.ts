/**
 * Requests a page of another origin makes the operator's browser send to the console
 * (docs/operations.md#the-operator-console-and-metrics). Such a page reads no answer and sends no
 * token, but its requests come from the operator's own address: counted as failed admin
 * authentications, two dozen image tags would lock the operator out of the console for as long as
 * the page stays open. The browser names where a request comes from (Sec-Fetch-Site); what another
 * site, or another origin of this one, sent is refused before any credential is checked. A browser
 * that sends no Sec-Fetch-Site (older Safari) still names the sending page's origin (Origin) on a
 * POST and on fetch: one that is not the console's own is refused the same way. A client that is
 * not a browser sends neither header and is let through.
 */
import { isIP } from "node:net";
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
 * Whether a browser says the request was sent by a page of another origin: by Sec-Fetch-Site, or,
 * where the browser sends none, by an Origin that is neither the console's configured origin nor
 * the one the browser addressed (its Host, so a console reached through a tunnel or by a name of
 * CONSOLE_ALLOWED_HOSTS still answers its own page; addressedByAnotherName judges the name). Origin
 * `null` (a sandboxed or privacy-hidden page) is not the console's own.
 */
export function sentByAnotherOrigin(headers: {
  secFetchSite: string | undefined;
  origin: string | undefined;
  host: string | undefined;
  consoleOrigin: string;
}): boolean {
  const site = headers.secFetchSite;
  if (site !== undefined) return site === "cross-site" || site === "same-site";
  if (headers.origin === undefined) return false;
  if (headers.origin === headers.consoleOrigin) return false;
  if (!URL.canParse(headers.origin)) return true;
  const sender = new URL(headers.origin);
  return headers.host === undefined || sender.host !== headers.host.toLowerCase();
}

/**
 * Whether the request was addressed to a host name that is not one of the console's. A site whose
 * name its owner points at this node's address once its page is open (DNS rebinding) is, to the
 * browser, that site's own origin: on plain http the browser sends no Sec-Fetch-Site, and a read
 * sends no Origin either, so such a page's requests (a wrong token in a header included, since it
 * is the same origin) look like a tool's but for the name in Host. No such page can name the
 * console by an IP address or by localhost (the browser resolves those itself), so those,
 * CONSOLE_ORIGIN's host and CONSOLE_ALLOWED_HOSTS are answered; any other name is refused.
 */
export function addressedByAnotherName(host: string | undefined, allowedHosts: readonly string[]): boolean {
  if (host === undefined) return false;
  if (!URL.canParse(`http://${host}`)) return true;
  const name = new URL(`http://${host}`).hostname;
  if (allowedHosts.includes(name)) return false;
  if (name === "localhost" || name.endsWith(".localhost")) return false;
  return isIP(name.replace(/^\[(.*)\]$/, "$1")) === 0;
}

/**
 * 403 cross_site_refused for a request a browser marks as sent by a page of another origin, or
 * addressed to a name that is not the console's, on the routes refusesCrossSite names (`basePath` is
 * taken off the request's path first).
 */
export function refuseCrossSite(
  basePath: string,
  consoleSite: { origin: string; allowedHosts: readonly string[] },
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const path = c.req.path.startsWith(basePath) ? c.req.path.slice(basePath.length) : c.req.path;
    if (!refusesCrossSite(c.req.method, path)) return next();
    const headers = {
      secFetchSite: c.req.header("sec-fetch-site"),
      origin: c.req.header("origin"),
      host: c.req.header("host"),
      consoleOrigin: consoleSite.origin,
    };
    if (sentByAnotherOrigin(headers))
      throw new AppError(
        "cross_site_refused",
        "the console answers its own page only: this request was sent by a page of another origin",
      );
    if (addressedByAnotherName(headers.host, consoleSite.allowedHosts))
      throw new AppError(
        "cross_site_refused",
        `the console answers at its own names only (CONSOLE_ORIGIN's host, CONSOLE_ALLOWED_HOSTS, localhost or an IP address), and this request was addressed to ${JSON.stringify(headers.host)}: use one of those, or add the name to CONSOLE_ALLOWED_HOSTS`,
      );
    await next();
  };
}
