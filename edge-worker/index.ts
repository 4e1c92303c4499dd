/**
 * The edge worker (docs/architecture.md): registration ingress and routing to the origin, under BASE_PATH.
 * Imports nothing but `shared/` and Hono, and runs in workerd (no Node built-ins).
 */
import { Hono } from "hono";
import { type EdgeBindings, type EdgeConfig, parseEdgeConfig } from "./config.ts";
import { errorResponse, newRequestId } from "./errors.ts";
import { createFacilitatorRefusals, handleFacilitator } from "./facilitator.ts";
import { EdgeLockouts, PUBLIC_AGENT_PATHS } from "./lockouts.ts";
import { type FetchOrigin, passThrough } from "./proxy.ts";
import { EdgeQuotes } from "./quotes.ts";
import { handleRegister } from "./register.ts";
import { RegistrationBackoff } from "./registration-backoff.ts";
import { routedPath } from "./routed-path.ts";

export type EdgeEnv = { Bindings: EdgeBindings; Variables: { requestId: string } };

export type EdgeDeps = { config: EdgeConfig; fetchOrigin: FetchOrigin };

const PLAIN_HTTP_REFUSED =
  "use https: this service does not answer plain http, which anyone on the way can read; " +
  "a token sent with this request went in clear, so rotate it (POST /agent/v1/token/rotate over https)";

/**
 * The methods the edge forwards: HTTP's own but TRACE and CONNECT. A TRACE asks each hop on
 * the way to echo the request back, and the request the edge sends carries the edge secret: a TLS
 * proxy before the origin that answers TRACE itself (Apache's default) would hand the secret to any
 * caller (docs/security.md). The origin answers none of the others this list leaves out.
 */
const FORWARDED_METHODS: ReadonlySet<string> = new Set([
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "PATCH",
  "DELETE",
  "OPTIONS",
]);

/**
 * A slash or backslash percent-encoded inside a path segment (`%2F`, `%5C`, either case). The edge
 * routes on segments as the client spelled them, but a TLS proxy before the origin that decodes
 * these (several do) splits the segment there: `{base}/agent/v1/x%2F..%2F..%2Fadmin/agents`, which
 * the edge routed to the gateway, would reach the origin as `{base}/admin/agents` (docs/security.md).
 * No route of the API has a slash or backslash inside a segment (the OpenAPI document's path
 * parameters are action ids, transaction hashes, payers and nonces: uuids and hex), so such a path
 * is refused, never forwarded.
 */
const ENCODED_SEPARATOR = /%(2f|5c)/i;

const ENCODED_SEPARATOR_REFUSED =
  "the path holds an encoded slash or backslash (%2F, %5C) inside a segment, which no route of this API has";

/**
 * Routes, by allowlist: register, the rest of `/agent/v1/*` (lockouts.ts), `/x402/*` (quotes.ts,
 * facilitator.ts) and the webhooks' keys (`/.well-known/webhooks/keys`, GET only). Everything else
 * is a 404 made here and never forwarded, which covers `{base}/admin/*` (admin routes are not
 * opened through the public edge, docs/security.md) and the private `{base}/healthz`.
 */
export function createEdgeApp(deps: EdgeDeps): Hono<EdgeEnv> {
  const { config, fetchOrigin } = deps;
  const app = new Hono<EdgeEnv>({ getPath: routedPath });
  app.use("*", async (c, next) => {
    c.set("requestId", newRequestId());
    await next();
  });
  // Cloudflare hands the worker a route's plain http requests too, unless the zone redirects them.
  // Served, an agent's token and a registration's new one would cross the network in clear on
  // every request, and go on working: refused instead, before any route, so the client sees it at
  // once. Not redirected: the token was sent with this request already, and a redirect that the
  // client follows would keep it working over http until the client drops the header.
  if (!config.plainHttpServed) {
    app.use("*", async (c, next) => {
      if (new URL(c.req.url).protocol === "https:") return next();
      return errorResponse("validation_failed", PLAIN_HTTP_REFUSED, c.get("requestId"), {
        "cache-control": "no-store",
      });
    });
  }

  app.use("*", async (c, next) => {
    if (FORWARDED_METHODS.has(c.req.method)) return next();
    return errorResponse("not_found", "no such route", c.get("requestId"));
  });

  app.use("*", async (c, next) => {
    if (!ENCODED_SEPARATOR.test(new URL(c.req.url).pathname)) return next();
    return errorResponse("validation_failed", ENCODED_SEPARATOR_REFUSED, c.get("requestId"));
  });

  const base = new Hono<EdgeEnv>();
  const backoff = new RegistrationBackoff();
  base.all("/agent/v1/register", (c) =>
    handleRegister(fetchOrigin, c.req.raw, config, c.get("requestId"), backoff),
  );
  // GET (and HEAD) only: any other method of these paths is the gateway's, which authenticates it,
  // so it goes through the lockouts below, which also keep the origin's word to the edge from the client.
  for (const path of PUBLIC_AGENT_PATHS) {
    base.get(path, (c) => passThrough(fetchOrigin, c.req.raw, config, c.get("requestId")));
  }
  // The rest authenticates at the origin: a flood of bad tokens meets the lockout here too.
  const lockouts = new EdgeLockouts();
  base.all("/agent/v1/*", (c) => lockouts.handle(fetchOrigin, c.req.raw, config, c.get("requestId")));
  const facilitatorRefusals = createFacilitatorRefusals();
  for (const operation of ["verify", "settle"]) {
    base.post(`/x402/facilitator/${operation}`, (c) =>
      handleFacilitator(fetchOrigin, c.req.raw, config, c.get("requestId"), facilitatorRefusals),
    );
  }
  // A quote the origin says holds for every caller a while is given here meanwhile (quotes.ts).
  const quotes = new EdgeQuotes();
  base.get("/x402/*", (c) => quotes.handle(fetchOrigin, c.req.raw, config, c.get("requestId")));
  base.all("/x402/*", (c) => passThrough(fetchOrigin, c.req.raw, config, c.get("requestId")));
  // The webhooks' public keys, so a receiver verifies `v1a` signatures without a shared secret.
  base.get("/.well-known/webhooks/keys", (c) =>
    passThrough(fetchOrigin, c.req.raw, config, c.get("requestId")),
  );
  app.route(config.basePath, base);

  // A base URL without its base path (`http://127.0.0.1:8787`, the edge's address alone) had every
  // request answered "no such route", which did not say why.
  const outsideBase = `no such route: every route of this service is under ${config.basePath}, so a base URL ends in ${config.basePath}`;
  app.notFound((c) => {
    const pathname = new URL(c.req.url).pathname;
    const underBase = pathname === config.basePath || pathname.startsWith(`${config.basePath}/`);
    return errorResponse("not_found", underBase ? "no such route" : outsideBase, c.get("requestId"));
  });
  app.onError((error, c) => {
    console.error(
      JSON.stringify({ request_id: c.get("requestId"), error: error.name, message: error.message }),
    );
    return errorResponse("internal_error", "internal error", c.get("requestId"));
  });
  return app;
}

/**
 * One app per bindings object: the vars are known only when a request arrives, and workerd hands
 * the same `env` to every request of an isolate, so this builds once without a global config.
 */
const apps = new WeakMap<EdgeBindings, Hono<EdgeEnv>>();

export default {
  fetch(request, env, ctx) {
    let app = apps.get(env);
    if (!app) {
      const parsed = parseEdgeConfig(env);
      if (!parsed.ok) {
        console.error(JSON.stringify({ error: "edge misconfigured", problems: parsed.error }));
        return errorResponse("service_unavailable", "the edge is not configured", newRequestId());
      }
      app = createEdgeApp({ config: parsed.value, fetchOrigin: (upstream) => fetch(upstream) });
      apps.set(env, app);
    }
    return app.fetch(request, env, ctx);
  },
} satisfies ExportedHandler<EdgeBindings>;
