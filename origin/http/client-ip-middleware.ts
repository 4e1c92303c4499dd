import type { IncomingMessage } from "node:http";
import type { MiddlewareHandler } from "hono";
import type { CidrSet } from "./cidr.ts";
import { resolveClientIp } from "./client-ip.ts";
import type { AppEnv } from "./env.ts";

/** Sets `clientIp` from the socket peer and, behind trusted proxies, X-Forwarded-For. */
export function clientIpMiddleware(trusted: CidrSet): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
    c.set(
      "clientIp",
      resolveClientIp(incoming?.socket.remoteAddress, c.req.header("x-forwarded-for"), trusted),
    );
    await next();
  };
}
