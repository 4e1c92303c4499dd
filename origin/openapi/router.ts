import { Hono } from "hono";
import { type Capability, capability } from "../capability.ts";
import type { AppEnv } from "../http/env.ts";
import { buildOpenApiDocument } from "./document.ts";
import { route } from "./route.ts";

/**
 * GET {base}/agent/v1/openapi.json: the public document (the gateway, registration, x402), without
 * authentication (an agent reads it before it holds a token). Built once: it depends only on the
 * base path. The console's document is the console router's, on the private origin only.
 */
export function createOpenApiRouter(basePath: string): Hono<AppEnv> {
  const body = JSON.stringify(buildOpenApiDocument(basePath, "public"));
  const router = new Hono<AppEnv>();
  route(router, "/agent/v1/openapi.json", "getOpenApi", (c) =>
    c.body(body, 200, { "content-type": "application/json", "cache-control": "public, max-age=300" }),
  );
  return router;
}

/** The document, public like register: an agent reads it before it holds a token. */
export function createOpenApiModule(basePath: string): Capability {
  return capability("openapi", {
    routes: [{ path: "/agent/v1/openapi.json", router: createOpenApiRouter(basePath) }],
  });
}
