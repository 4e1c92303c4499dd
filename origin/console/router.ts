import { Hono } from "hono";
import { SlidingWindowLimiter } from "../../shared/rate-limiter.ts";
import { AppError } from "../errors.ts";
import { clientIpMiddleware } from "../http/client-ip-middleware.ts";
import { refuseCrossSite } from "../http/cross-site.ts";
import type { AppEnv } from "../http/env.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { buildOpenApiDocument } from "../openapi/document.ts";
import { route } from "../openapi/route.ts";
import { findLiveSession } from "../passkeys/sessions.ts";
import { ADMIN_AUTH_FAILURES, createAdminAuth } from "./admin-auth.ts";
import { auditHandler } from "./audit.ts";
import { browseConsoleHandlers } from "./browse.ts";
import { changeIdentityHandler } from "./change-identity.ts";
import { changeSettingsHandler } from "./change-settings.ts";
import { chartsHandler, type ServiceWallets } from "./charts.ts";
import type { NodeLocal } from "./node-local.ts";
import { operationsHandler } from "./operations.ts";
import { createPageRouter } from "./page.ts";
import { passkeyConsoleHandlers } from "./passkeys.ts";
import { registrationOverviewHandler } from "./registration-overview.ts";
import { sessionConsoleHandlers } from "./session.ts";
import { webhooksConsoleHandlers } from "./webhooks.ts";

/**
 * The operator console and the metrics (docs/operations.md#the-operator-console-and-metrics), on
 * the private origin only: the edge routes neither `{base}/admin/*` nor `{base}/metrics`
 * (edge-worker/index.ts forwards an allowlist). Mounted whatever the gateway switch, which governs
 * the gateway's endpoints: an operator can read the node and prepare registration settings before
 * turning the gateway on. Without AGENT_ADMIN_API_TOKEN nothing here can authenticate, so every
 * route answers 404 `feature_disabled`.
 */
export function createConsoleRouter(
  deps: Infrastructure,
  node: NodeLocal,
  wallets: ServiceWallets = { treasury: undefined, settler: undefined },
): Hono<AppEnv> {
  const router = new Hono<AppEnv>();
  const adminApiToken = deps.config.secrets.adminApiToken;
  if (!adminApiToken) {
    const off = (): never => {
      throw new AppError("feature_disabled", "the operator console needs AGENT_ADMIN_API_TOKEN on this node");
    };
    for (const path of ["/admin/agents", "/admin/agents/*", "/admin/openapi.json", "/metrics"]) {
      router.all(path, off);
    }
    return router;
  }

  // No edge secret here: the edge never forwards these routes, so the client is the socket peer
  // (or, behind AGENT_TRUSTED_PROXIES, the right-most untrusted X-Forwarded-For hop).
  const clientIp = clientIpMiddleware(deps.config.trustedProxies);
  router.use("/admin/*", clientIp);
  router.use("/metrics", clientIp);
  router.use("/admin/agents/*", async (c, next) => {
    // API answers are operational data: never cached, never sniffed into something else.
    c.header("Cache-Control", "no-store");
    c.header("X-Content-Type-Options", "nosniff");
    await next();
  });
  // Before any credential is checked, so another origin's requests count as no failure of the
  // operator's address; the page itself (`{base}/admin/agents`) is let through.
  const sameOriginOnly = refuseCrossSite(deps.config.http.basePath, deps.config.console);
  router.use("/admin/agents/*", sameOriginOnly);
  router.use("/metrics", sameOriginOnly);
  const auth = createAdminAuth({
    adminApiToken,
    registrationAdminSecret: deps.config.secrets.registrationAdmin,
    failuresPerIp: new SlidingWindowLimiter({ ...ADMIN_AUTH_FAILURES }),
    refused: node.refusals,
    logger: deps.logger,
    findSession: async (token) => (await findLiveSession(deps.database.db, token))?.operator ?? null,
  });

  router.route("/", createPageRouter(deps.config.http.basePath, deps.config.console.origin));
  // The console's own OpenAPI document: like the page, no data, so no token; private like it.
  const document = JSON.stringify(buildOpenApiDocument(deps.config.http.basePath, "admin"));
  route(router, "/", "consoleOpenApi", (c) =>
    c.body(document, 200, { "content-type": "application/json", "cache-control": "no-store" }),
  );
  const session = sessionConsoleHandlers(deps, auth);
  route(router, "/", "consoleSessionOptions", auth.notBlocked, session.optionsLimit, session.options);
  route(router, "/", "consoleSignIn", auth.notBlocked, session.start);
  route(router, "/", "consoleSession", auth.read, session.show);
  route(router, "/", "consoleSignOut", auth.read, session.end);
  route(router, "/", "consoleSignOutEverywhere", auth.read, session.endEverywhere);
  route(router, "/", "consoleRegistration", auth.read, registrationOverviewHandler(deps, node));
  route(router, "/", "consoleOperations", auth.read, operationsHandler(deps));
  route(router, "/", "consoleAudit", auth.read, auditHandler(deps));
  const browse = browseConsoleHandlers(deps);
  route(router, "/", "consoleSearch", auth.read, browse.search);
  route(router, "/", "consoleIdentities", auth.read, browse.identities);
  route(router, "/", "consoleAgent", auth.read, browse.agent);
  route(router, "/", "consoleActions", auth.read, browse.actions);
  route(router, "/", "consoleAction", auth.read, browse.action);
  route(router, "/", "consoleSettlements", auth.read, browse.settlements);
  route(router, "/", "consoleSettlement", auth.read, browse.settlement);
  route(router, "/", "consoleCharts", auth.read, chartsHandler(deps, node, wallets));
  route(router, "/", "consoleChangeSettings", auth.change, changeSettingsHandler(deps));
  route(router, "/", "consoleChangeIdentity", auth.change, changeIdentityHandler(deps));
  const webhooks = webhooksConsoleHandlers(deps);
  route(router, "/", "consoleWebhooks", auth.read, webhooks.list);
  route(router, "/", "consoleAddWebhook", auth.change, webhooks.add);
  route(router, "/", "consoleRemoveWebhook", auth.change, webhooks.remove);
  route(router, "/", "consoleReplayWebhook", auth.change, webhooks.replay);
  route(router, "/", "consoleRotateWebhookSecret", auth.change, webhooks.rotateSecret);
  const passkeys = passkeyConsoleHandlers(deps);
  route(router, "/", "consolePasskeys", auth.read, passkeys.list);
  route(router, "/", "consolePasskeyRegistrationOptions", auth.change, passkeys.registrationOptions);
  route(router, "/", "consolePasskeyRegistration", auth.change, passkeys.register);
  route(router, "/", "consoleApprovalOptions", auth.change, passkeys.approvalOptions);
  route(router, "/", "consoleApproval", auth.change, passkeys.approve);
  route(router, "/", "consolePasskeyRevoke", auth.change, passkeys.revoke);
  // GET {base}/metrics: the Prometheus text format, for a scraper holding the admin read token.
  route(router, "/", "metrics", auth.scrape, async (c) =>
    c.body(await node.metrics.render(), 200, {
      "Content-Type": node.metrics.registry.contentType,
      "Cache-Control": "no-store",
    }),
  );
  return router;
}
