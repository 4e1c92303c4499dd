import { Hono } from "hono";
import { bearerAuth, requireCapability } from "../auth/bearer-auth.ts";
import { createLatestBlock } from "../chain/block-number.ts";
import type { AppDeps } from "../deps.ts";
import { clientIpMiddleware } from "../http/client-ip-middleware.ts";
import type { AppEnv } from "../http/env.ts";
import { balanceHandler } from "./balance.ts";
import { createGatewayLimiters, type GatewayLimiters } from "./limits.ts";
import { networkHandler } from "./network.ts";
import { rpcHandler } from "./rpc.ts";

export type GatewayRouterOptions = { limiters?: GatewayLimiters };

/**
 * The agent wallet API under {base}/agent/v1. Built only when the gateway switch is on
 * (origin/app.ts), so with the switch off neither the limiter nor any route exists.
 */
export function createGatewayRouter(deps: AppDeps, options: GatewayRouterOptions = {}): Hono<AppEnv> {
  const limiters = options.limiters ?? createGatewayLimiters();
  const router = new Hono<AppEnv>();
  const latestBlock = deps.rpc ? createLatestBlock(deps.rpc) : undefined;

  router.use("*", clientIpMiddleware(deps.config.trustedProxies));
  router.use(
    "*",
    bearerAuth({
      db: deps.database.db,
      failuresPerIp: limiters.failuresPerIp,
      requestsPerAgent: limiters.requestsPerAgent,
      onFailure: (reason, clientIp) => deps.logger.info({ reason, client_ip: clientIp }, "auth failed"),
    }),
  );

  router.get("/network", requireCapability("read"), networkHandler(deps.config, latestBlock));
  router.get("/balance", requireCapability("read"), balanceHandler(deps.rpc));
  router.post("/rpc", requireCapability("read"), rpcHandler(deps.rpc));
  return router;
}
