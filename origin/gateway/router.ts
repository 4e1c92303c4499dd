import { type Handler, Hono, type MiddlewareHandler } from "hono";
import { getActionHandler } from "../agent-actions/get-action.ts";
import { bearerAuth, requireCapability } from "../auth/bearer-auth.ts";
import { createTokenLookup } from "../auth/identity-repository.ts";
import { createLatestBlock } from "../chain/block-number.ts";
import { AppError } from "../errors.ts";
import type { EventsHandlers } from "../events/capability.ts";
import { clientIpMiddleware } from "../http/client-ip-middleware.ts";
import { createEdgeSecretVerifier } from "../http/edge-secret.ts";
import type { AppEnv } from "../http/env.ts";
import type { RefusalCounter } from "../http/refusals.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { route, routeMiddleware } from "../openapi/route.ts";
import { balanceHandler } from "./balance.ts";
import { createGatewayLimiters, type GatewayLimiters } from "./limits.ts";
import { networkHandler } from "./network.ts";
import { rotateTokenHandler } from "./rotate-token.ts";
import { rpcHandler } from "./rpc.ts";
import { rpcPrefetch } from "./rpc-prefetch.ts";

/**
 * Handlers of the write routes, built by the capabilities whose switches are on (the money
 * module's faucet and transfers, the x402 module's authorize); a route whose handler is absent
 * answers `feature_disabled`.
 */
export type GatewayWriteHandlers = {
  faucet?: Handler<AppEnv>;
  transfers?: Handler<AppEnv>;
  x402Authorize?: Handler<AppEnv>;
  /** The agent's spending policy (origin/policy/routes.ts). */
  policy?: { get: Handler<AppEnv>; patch: Handler<AppEnv>; check: Handler<AppEnv> };
};

export type GatewayRouterOptions = {
  /** This node's limiters (origin/app.ts shares them with the console); fresh ones otherwise. */
  limiters?: GatewayLimiters;
  writes?: GatewayWriteHandlers;
  /** Told of each limiter refusal (metrics). */
  refusals?: RefusalCounter;
  /** The agent's event stream and the action wait (origin/events/); absent: no stream, no wait. */
  events?: EventsHandlers;
};

/**
 * The agent wallet API under {base}/agent/v1. Built only when the gateway switch is on
 * (origin/app.ts), so with the switch off neither the limiter nor any route exists.
 */
export function createGatewayRouter(deps: Infrastructure, options: GatewayRouterOptions = {}): Hono<AppEnv> {
  const limiters = options.limiters ?? createGatewayLimiters();
  const router = new Hono<AppEnv>();
  const latestBlock = deps.rpc ? createLatestBlock(deps.rpc) : undefined;

  const edgeSecret = deps.config.secrets.edgeShared;
  router.use(
    "*",
    clientIpMiddleware(
      deps.config.trustedProxies,
      edgeSecret ? createEdgeSecretVerifier(edgeSecret) : undefined,
    ),
  );
  const at = "/agent/v1";
  // Before the token is read, so the read and the upstream call overlap (rpc-prefetch.ts).
  routeMiddleware(
    router,
    at,
    "rpc",
    rpcPrefetch(deps.rpc, limiters.recentAuthentications, limiters.rpcPrefetch),
  );
  // On the gateway's own operations only, never "*": a request that is none of them (another
  // path, a trailing slash such as `register/`, another method) is 404 `not_found`, token or not,
  // and reads no token, so it is not counted as a failed authentication of the client's address.
  const authenticate = bearerAuth({
    lookup: createTokenLookup(deps.database.db),
    failuresPerIp: limiters.failuresPerIp,
    recentAuthentications: limiters.recentAuthentications,
    lockoutAllowance: limiters.lockoutAllowance,
    requestsPerAgent: limiters.requestsPerAgent,
    onFailure: (reason, clientIp) => deps.logger.info({ reason, client_ip: clientIp }, "auth failed"),
    refusals: options.refusals,
  });
  const authenticated = (
    operationId: string,
    ...handlers: [...MiddlewareHandler<AppEnv>[], Handler<AppEnv>]
  ) => route(router, at, operationId, authenticate, ...handlers);

  authenticated("getNetwork", requireCapability("read"), networkHandler(deps.config, latestBlock));
  authenticated("getBalance", requireCapability("read"), balanceHandler(deps.rpc));
  authenticated(
    "rpc",
    requireCapability("read"),
    rpcHandler(deps.rpc, limiters.rpcInFlight, options.refusals, deps.config.http.rpcAnswerDeadlineMs),
  );
  authenticated(
    "getAction",
    requireCapability("read"),
    getActionHandler(deps.database.db, options.events?.waiter),
  );
  authenticated(
    "streamEvents",
    requireCapability("read"),
    options.events?.stream ?? featureDisabled("the event stream"),
  );
  // No capability: any valid token may replace itself (rotate-token.ts).
  authenticated("rotateToken", rotateTokenHandler(deps.database.db));

  // The capability is checked before the feature switch: a token without it learns nothing more.
  const writes = options.writes ?? {};
  const policy = writes.policy;
  authenticated("getPolicy", requireCapability("read"), policy?.get ?? featureDisabled("spending policies"));
  authenticated(
    "checkPolicy",
    requireCapability("read"),
    policy?.check ?? featureDisabled("spending policies"),
  );
  // Only a token that can spend changes how its agent may spend (a read-only token cannot freeze it).
  authenticated(
    "patchPolicy",
    requireCapability("transfer"),
    policy?.patch ?? featureDisabled("spending policies"),
  );
  authenticated("faucet", requireCapability("faucet"), writes.faucet ?? featureDisabled("the faucet"));
  authenticated("transfer", requireCapability("transfer"), writes.transfers ?? featureDisabled("transfers"));
  authenticated(
    "authorizeX402",
    requireCapability("transfer"),
    writes.x402Authorize ?? featureDisabled("x402 authorization"),
  );
  return router;
}

function featureDisabled(what: string): Handler<AppEnv> {
  return () => {
    throw new AppError("feature_disabled", `${what} is not available on this node`);
  };
}
