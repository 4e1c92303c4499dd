import type { Context } from "hono";
import { routePath } from "hono/route";
import type { AppEnv } from "./env.ts";

/**
 * The matched route pattern of the handler that answered (`/77/agent/v1/actions/:action_id`), or
 * `unmatched`: never the raw path, which may carry a token a client put in it (docs/security.md), and
 * whose every value would be a metrics series of its own. Read after the handlers have run.
 */
export function routeLabel(c: Context<AppEnv>): string {
  return c.get("routeUnmatched") ? "unmatched" : routePath(c) || "unmatched";
}
