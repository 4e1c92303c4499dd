import { Hono } from "hono";
import { errorMessage } from "../shared/error-message.ts";
import type { Capability } from "./capability.ts";
import { isDatabaseUnavailable } from "./db/unavailable.ts";
import { AppError, errorBody } from "./errors.ts";
import type { AppEnv } from "./http/env.ts";
import { requestContext } from "./http/request-context.ts";
import type { Infrastructure } from "./infrastructure.ts";
import type { OriginMetrics } from "./metrics/metrics.ts";

/**
 * The HTTP app: request context and metrics on every request, each capability's routers under
 * BASE_PATH in the order given (compose.ts decides which capabilities exist), and the error
 * envelope for unknown routes and failures.
 */
export function createApp(
  infra: Infrastructure & { metrics: OriginMetrics },
  capabilities: readonly Capability[],
): Hono<AppEnv> {
  const { metrics } = infra;
  const app = new Hono<AppEnv>();
  app.use("*", requestContext(infra.logger));
  app.use("*", metrics.http());

  const base = new Hono<AppEnv>();
  for (const { routes } of capabilities) for (const { path, router } of routes) base.route(path, router);
  app.route(infra.config.http.basePath, base);

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
      infra.logger.warn(
        { request_id: requestId, err: { message: errorMessage(error) } },
        "database unavailable",
      );
      c.header("Retry-After", "1");
      return c.json(
        errorBody("service_unavailable", "the database is unavailable; try again shortly", requestId),
        503,
      );
    }
    infra.logger.error(
      { request_id: requestId, err: { name: error.name, message: errorMessage(error) } },
      "unhandled",
    );
    return c.json(errorBody("internal_error", "internal error", requestId), 500);
  });
  return app;
}
