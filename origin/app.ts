import { Hono } from "hono";
import { createOriginMetrics } from "./console/metrics.ts";
import type { NodeLocal } from "./console/node-local.ts";
import { createConsoleRouter } from "./console/router.ts";
import { isDatabaseUnavailable } from "./db/unavailable.ts";
import type { AppDeps } from "./deps.ts";
import { AppError, errorBody } from "./errors.ts";
import { createGatewayLimiters } from "./gateway/limits.ts";
import { createHealthRouter } from "./health.ts";
import type { AppEnv } from "./http/env.ts";
import { requestContext } from "./http/request-context.ts";
import { createOpenApiRouter } from "./openapi/router.ts";
import { EarlyLimiter } from "./registration/early-limiter.ts";
import { createX402Router } from "./x402/router.ts";

export type { NodeLocal };

/**
 * Capability routers that later issues mount; each gets the deps and this app's node-local state
 * (limiters and metrics, shared with the console) and returns a Hono router.
 */
export type AppRouters = {
  /** Mounted at {base}/agent/v1 only when AGENT_GATEWAY_ENABLED is the literal `true`. */
  gateway?: (deps: AppDeps, node: NodeLocal) => Hono<AppEnv>;
  /**
   * Mounted at {base}/agent/v1/register, before the gateway and so outside its bearer auth (SPEC:
   * register needs no token), and only with the gateway switch on: with it off, every /agent/v1/*
   * path stays 404.
   */
  registration?: (deps: AppDeps, node: NodeLocal) => Hono<AppEnv>;
};

/**
 * Composes the origin under BASE_PATH. With the gateway switch off, nothing of the gateway is
 * built: every /agent/v1/* path falls through to the 404 (SPEC "Configuration switches").
 */
export function createApp(deps: AppDeps, routers: AppRouters = {}): Hono<AppEnv> {
  const metrics = deps.metrics ?? createOriginMetrics({ db: deps.database.db });
  const node: NodeLocal = {
    // As before they were shared: the gateway's tiers on the system's time, the registration's
    // early limiter on the deps' clock (its windows follow the quota clock).
    limiters: createGatewayLimiters(),
    earlyLimiter: new EarlyLimiter(() => deps.clock.now().getTime()),
    refusals: metrics.refused,
    metrics,
    startedAt: deps.clock.now(),
  };
  const app = new Hono<AppEnv>();
  app.use("*", requestContext(deps.logger));
  app.use("*", metrics.http());

  const base = new Hono<AppEnv>();
  base.route("/", createHealthRouter(deps));
  // The console and /metrics: private origin only (the edge never routes them), whatever the
  // gateway switch (console/router.ts says why).
  base.route("/", createConsoleRouter(deps, node));
  if (deps.config.gatewayEnabled) {
    // Registered first: Hono runs matching handlers in registration order, so the register route
    // answers before the gateway's `*` middleware (client IP, bearer auth) would run.
    if (routers.registration) base.route("/agent/v1/register", routers.registration(deps, node));
    // Public, like register: an agent reads the document before it holds a token.
    base.route("/agent/v1/openapi.json", createOpenApiRouter(deps.config.http.basePath));
    if (routers.gateway) base.route("/agent/v1", routers.gateway(deps, node));
    // The demo resource and the facilitator (x402/router.ts): public, present when x402 is on.
    const x402 = createX402Router(deps, { refusals: node.refusals });
    if (x402) base.route("/x402", x402);
  }
  app.route(deps.config.http.basePath, base);

  app.notFound((c) => {
    c.set("routeUnmatched", true);
    return c.json(errorBody("not_found", "no such route", c.get("requestId")), 404);
  });
  app.onError((error, c) => {
    const requestId = c.get("requestId");
    if (error instanceof AppError) {
      for (const [name, value] of Object.entries(error.headers)) c.header(name, value);
      return c.json(errorBody(error.code, error.message, requestId, error.fields), error.status);
    }
    if (isDatabaseUnavailable(error)) {
      // A database restart or a cut connection is the service being unavailable, not a bug: a
      // clear 503 the client may retry (money requests are idempotent by key).
      deps.logger.warn({ request_id: requestId, err: { message: error.message } }, "database unavailable");
      c.header("Retry-After", "1");
      return c.json(
        errorBody("service_unavailable", "the database is unavailable; try again shortly", requestId),
        503,
      );
    }
    deps.logger.error(
      { request_id: requestId, err: { name: error.name, message: error.message } },
      "unhandled",
    );
    return c.json(errorBody("internal_error", "internal error", requestId), 500);
  });
  return app;
}
