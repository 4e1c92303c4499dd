import type { IncomingMessage } from "node:http";
import type { MiddlewareHandler } from "hono";
import { HEADER_CLIENT_IP, HEADER_EDGE_SECRET } from "../../shared/constants.ts";
import type { CidrSet } from "./cidr.ts";
import { normalizeIp, resolveClientIp } from "./client-ip.ts";
import type { EdgeSecretVerifier } from "./edge-secret.ts";
import type { AppEnv } from "./env.ts";

export type ClientIpHeaders = {
  remoteAddress: string | undefined;
  forwardedFor: string | undefined;
  edgeSecret: string | undefined;
  edgeClientIp: string | undefined;
};

/**
 * X-svc-Client-IP when the request carries a valid edge secret (the edge sets it from
 * its client metadata and strips a client's copy); otherwise, or when that value is no IP
 * address, the socket peer or, behind trusted proxies, X-Forwarded-For. The secret is checked
 * only when one is presented, so a direct client pays nothing for the edge rule. `viaEdge`: the
 * address is the edge's.
 */
export function selectClientIp(
  headers: ClientIpHeaders,
  trusted: CidrSet,
  verifyEdge: EdgeSecretVerifier | undefined,
): { ip: string; viaEdge: boolean } {
  if (verifyEdge && headers.edgeSecret !== undefined && headers.edgeClientIp !== undefined) {
    const fromEdge = verifyEdge(headers.edgeSecret) ? normalizeIp(headers.edgeClientIp) : null;
    if (fromEdge !== null) return { ip: fromEdge, viaEdge: true };
  }
  return { ip: resolveClientIp(headers.remoteAddress, headers.forwardedFor, trusted), viaEdge: false };
}

/** Sets `clientIp` and `viaEdge` for the rest of the request (see selectClientIp). */
export function clientIpMiddleware(
  trusted: CidrSet,
  verifyEdge?: EdgeSecretVerifier,
): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
    const client = selectClientIp(
      {
        remoteAddress: incoming?.socket.remoteAddress,
        forwardedFor: c.req.header("x-forwarded-for"),
        edgeSecret: verifyEdge ? c.req.header(HEADER_EDGE_SECRET) : undefined,
        edgeClientIp: verifyEdge ? c.req.header(HEADER_CLIENT_IP) : undefined,
      },
      trusted,
      verifyEdge,
    );
    c.set("clientIp", client.ip);
    c.set("viaEdge", client.viaEdge);
    await next();
  };
}
