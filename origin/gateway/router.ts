import { type Handler, Hono } from "hono";
import { createMoneyExecutor, type ExecutorDeps } from "../actions/execute.ts";
import { faucetHandler } from "../actions/faucet.ts";
import { getActionHandler } from "../actions/get-action.ts";
import type { MoneyServices } from "../actions/money-services.ts";
import { createActionClaimer } from "../actions/repository.ts";
import { transfersHandler } from "../actions/transfers.ts";
import { bearerAuth, requireCapability } from "../auth/bearer-auth.ts";
import { createTokenLookup } from "../auth/identity-repository.ts";
import { createLatestBlock } from "../chain/block-number.ts";
import { broadcastLeaseMs } from "../chain/outgoing.ts";
import type { AppDeps } from "../deps.ts";
import { AppError } from "../errors.ts";
import { clientIpMiddleware } from "../http/client-ip-middleware.ts";
import { createEdgeSecretVerifier } from "../http/edge-secret.ts";
import type { AppEnv } from "../http/env.ts";
import type { RefusalCounter } from "../http/refusals.ts";
import { x402AuthorizeHandler } from "../x402/authorize.ts";
import { balanceHandler } from "./balance.ts";
import { createGatewayLimiters, type GatewayLimiters } from "./limits.ts";
import { networkHandler } from "./network.ts";
import { rpcHandler } from "./rpc.ts";

/** Handlers of the write routes; a route whose handler is absent answers `feature_disabled`. */
export type WriteHandlers = {
  faucet?: Handler<AppEnv>;
  transfers?: Handler<AppEnv>;
  x402Authorize?: Handler<AppEnv>;
};

export type GatewayRouterOptions = {
  /** This node's limiters (origin/app.ts shares them with the console); fresh ones otherwise. */
  limiters?: GatewayLimiters;
  writes?: WriteHandlers;
  /** Told of each limiter refusal (metrics). */
  refusals?: RefusalCounter;
};

/**
 * The agent wallet API under {base}/agent/v1. Built only when the gateway switch is on
 * (origin/app.ts), so with the switch off neither the limiter nor any route exists.
 */
export function createGatewayRouter(deps: AppDeps, options: GatewayRouterOptions = {}): Hono<AppEnv> {
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
  router.use(
    "*",
    bearerAuth({
      lookup: createTokenLookup(deps.database.db),
      failuresPerIp: limiters.failuresPerIp,
      recentAuthentications: limiters.recentAuthentications,
      requestsPerAgent: limiters.requestsPerAgent,
      onFailure: (reason, clientIp) => deps.logger.info({ reason, client_ip: clientIp }, "auth failed"),
      refusals: options.refusals,
    }),
  );

  router.get("/network", requireCapability("read"), networkHandler(deps.config, latestBlock));
  router.get("/balance", requireCapability("read"), balanceHandler(deps.rpc));
  router.post(
    "/rpc",
    requireCapability("read"),
    rpcHandler(deps.rpc, limiters.rpcInFlight, options.refusals),
  );

  router.get("/actions/:action_id", requireCapability("read"), getActionHandler(deps.database.db));

  // The capability is checked before the feature switch: a token without it learns nothing more.
  const writes = { ...moneyHandlers(deps), ...x402Handlers(deps), ...options.writes };
  router.post("/faucet", requireCapability("faucet"), writes.faucet ?? featureDisabled("the faucet"));
  router.post("/transfers", requireCapability("transfer"), writes.transfers ?? featureDisabled("transfers"));
  router.post(
    "/x402/authorize",
    requireCapability("transfer"),
    writes.x402Authorize ?? featureDisabled("x402 authorization"),
  );
  return router;
}

/** The faucet and transfer routes of the switches that are on (and checked at start, main.ts). */
function moneyHandlers(deps: AppDeps): WriteHandlers {
  if (!deps.money || !deps.rpc) return {};
  const executorDeps: ExecutorDeps = {
    db: deps.database.db,
    rpc: deps.rpc,
    fees: deps.money.fees,
    clock: deps.clock,
    logger: deps.logger,
    broadcasts: deps.money.broadcasts,
    leaseMs: broadcastLeaseMs(deps.config.chain.timeoutMs),
  };
  const services: MoneyServices = {
    ...executorDeps,
    executor: createMoneyExecutor(executorDeps),
    claim: createActionClaimer(deps.database.db),
    config: deps.config,
    signer: deps.signer,
    operatorPool: deps.money.operatorPool,
    treasury: deps.money.treasury,
  };
  return {
    ...(deps.config.features.faucet && services.treasury ? { faucet: faucetHandler(services) } : {}),
    ...(deps.config.features.transfers ? { transfers: transfersHandler(services) } : {}),
  };
}

/**
 * The x402 authorize route when its switch is on (config requires the amount and payTo then). It
 * stands apart from the money routes: turning transfers off does not turn x402 off (SPEC).
 */
function x402Handlers(deps: AppDeps): WriteHandlers {
  const { amountUnits, payTo, maxTimeoutSeconds, dailyLimit } = deps.config.x402;
  if (!deps.config.features.x402 || amountUnits === undefined || !payTo) return {};
  return {
    x402Authorize: x402AuthorizeHandler({
      db: deps.database.db,
      signer: deps.signer,
      clock: deps.clock,
      policy: { amountUnits, payTo: payTo.toLowerCase(), maxTimeoutSeconds },
      dailyLimit,
    }),
  };
}

function featureDisabled(what: string): Handler<AppEnv> {
  return () => {
    throw new AppError("feature_disabled", `${what} is not available on this node`);
  };
}
