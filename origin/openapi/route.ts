import type { Handler, Hono, MiddlewareHandler } from "hono";
import type { AppEnv } from "../http/env.ts";
import { OPERATIONS, type Operation } from "./operations.ts";

const byId = new Map(OPERATIONS.map((operation) => [operation.operationId, operation]));

/** The route descriptor of an operation (operations.ts); a typo is a start-up error, not a 404. */
export function operation(operationId: string): Operation {
  const found = byId.get(operationId);
  if (!found) throw new Error(`no route descriptor ${operationId} in origin/openapi/operations.ts`);
  return found;
}

/**
 * Registers the handlers of an operation on a router mounted at `mountedAt` under {base}, at the
 * method and path of its descriptor: the one place a route's method and path are written, which
 * the OpenAPI document (document.ts) and the fuzz table (testing/fuzz/routes.ts) read too.
 */
export function route(
  router: Hono<AppEnv>,
  mountedAt: string,
  operationId: string,
  ...handlers: [...MiddlewareHandler<AppEnv>[], Handler<AppEnv>]
): void {
  const { method, local } = localRoute(mountedAt, operationId);
  router.on(method, local, ...(handlers as [Handler<AppEnv>]));
}

/**
 * Registers a middleware on one operation only, to run before the router's own `use` middleware
 * registered after it (Hono runs a request's matching handlers in the order they were registered).
 */
export function routeMiddleware(
  router: Hono<AppEnv>,
  mountedAt: string,
  operationId: string,
  middleware: MiddlewareHandler<AppEnv>,
): void {
  const { method, local } = localRoute(mountedAt, operationId);
  router.on(method, local, middleware);
}

function localRoute(mountedAt: string, operationId: string): { method: string; local: string } {
  const { method, path } = operation(operationId);
  const prefix = mountedAt === "/" ? "" : mountedAt;
  if (!path.startsWith(prefix))
    throw new Error(`${operationId} (${path}) is not under the router's mount point ${mountedAt}`);
  return {
    method: method.toUpperCase(),
    local: path.slice(prefix.length).replace(/\{([a-z_]+)\}/g, ":$1") || "/",
  };
}
