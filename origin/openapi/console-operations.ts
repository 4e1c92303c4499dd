/** The operator console's and the operations routes' part of the route table (operations.ts). */

import { nodeChartsSchema } from "../../shared/console-charts-schema.ts";
import {
  auditSchema,
  identityChangeRequestSchema,
  identityChangeResponseSchema,
  operationsOverviewSchema,
  registrationOverviewSchema,
  settingsChangeRequestSchema,
  settingsChangeResponseSchema,
  webhookAddRequestSchema,
  webhookAddResponseSchema,
  webhookRemoveRequestSchema,
  webhookRemoveResponseSchema,
  webhookReplayRequestSchema,
  webhookReplayResponseSchema,
  webhookRotateSecretRequestSchema,
  webhookRotateSecretResponseSchema,
  webhooksOverviewSchema,
} from "../../shared/console-schemas.ts";
import { BROWSE_OPERATIONS } from "./console-browse-operations.ts";
import {
  adminRateLimited,
  errorResponse,
  type Operation,
  PAYLOAD_TOO_LARGE,
  type ResponseSpec,
  STATUS_TEXT,
} from "./operation-types.ts";

/**
 * Scripts of the page's dependencies, loaded first and served by the origin from node_modules as
 * their package publishes them (never from a CDN: the page's CSP allows its own origin only):
 * @simplewebauthn/browser's bundle, which defines globalThis.SimpleWebAuthnBrowser.
 */
export const CONSOLE_VENDOR_SCRIPTS = ["simplewebauthn-browser.js"] as const;

/**
 * The page's scripts beside console.js, in the order the page loads them (each served as it is, by
 * its own route): the widgets, the hash router, the pages, the overview's charts, the passkeys and
 * approvals pages. console.js, loaded last, holds the tokens.
 */
export const CONSOLE_PAGE_SCRIPTS = [
  "widgets.js",
  "router.js",
  "pages.js",
  "charts.js",
  "passkeys.js",
  "approvals.js",
] as const;

/** consoleScript, consoleStyle, or consoleScript and the script's name in camelCase (consoleScriptPages). */
export function consoleAssetOperationId(asset: string): string {
  if (asset === "console.js") return "consoleScript";
  if (asset === "console.css") return "consoleStyle";
  const name = asset.replace(/\.js$/, "").replace(/-(\w)/g, (_, letter: string) => letter.toUpperCase());
  return `consoleScript${name[0]!.toUpperCase()}${name.slice(1)}`;
}

const consoleErrors = (...extra: number[]): Record<number, ResponseSpec> => {
  const all: Record<number, ResponseSpec> = {
    401: errorResponse("admin_auth_failed: a missing or wrong admin token"),
    404: errorResponse("feature_disabled: the console is off on this node (no AGENT_ADMIN_API_TOKEN)"),
    429: adminRateLimited("rate_limited: too many failed admin authentications from this address"),
    500: errorResponse("internal_error"),
  };
  for (const status of extra) all[status] = errorResponse(STATUS_TEXT[status] ?? "error");
  return all;
};

export const CONSOLE_OPERATIONS: readonly Operation[] = [
  // ─── Operator console (private origin only) ─────────────────────────────────────────────
  {
    method: "get",
    path: "/admin/agents",
    operationId: "consolePage",
    capability: "console",
    summary: "The console's HTML shell, without operational data.",
    tag: "console",
    security: [],
    responses: {
      200: { description: "HTML", contentType: "text/html" },
      404: errorResponse("feature_disabled: the console is off on this node"),
    },
  },
  ...(["console.js", "console.css", ...CONSOLE_VENDOR_SCRIPTS, ...CONSOLE_PAGE_SCRIPTS] as const).map(
    (asset): Operation => ({
      method: "get",
      path: `/admin/agents/assets/${asset}`,
      operationId: consoleAssetOperationId(asset),
      capability: "console",
      summary: "An asset of the console page.",
      tag: "console",
      security: [],
      responses: {
        200: {
          description: "the asset",
          contentType: asset.endsWith(".js") ? "text/javascript" : "text/css",
        },
        404: errorResponse("feature_disabled: the console is off on this node"),
      },
    }),
  ),
  {
    method: "get",
    path: "/admin/agents/registration",
    operationId: "consoleRegistration",
    capability: "console",
    summary: "Registration counters, quotas, key stock, recent identities and local limiter buckets.",
    tag: "console",
    security: ["adminApiToken"],
    responses: {
      200: {
        description: "the overview",
        body: { name: "RegistrationOverview", schema: registrationOverviewSchema },
      },
      ...consoleErrors(503),
    },
  },
  {
    method: "get",
    path: "/admin/agents/operations",
    operationId: "consoleOperations",
    capability: "console",
    summary: "Identity findings, key batches, actions, settlements and funding exceptions.",
    tag: "console",
    security: ["adminApiToken"],
    responses: {
      200: {
        description: "the views",
        body: { name: "OperationsOverview", schema: operationsOverviewSchema },
      },
      ...consoleErrors(503),
    },
  },
  {
    method: "get",
    path: "/admin/agents/audit",
    operationId: "consoleAudit",
    capability: "console",
    summary: "Every recorded change, newest first.",
    tag: "console",
    security: ["adminApiToken"],
    responses: {
      200: { description: "the audit", body: { name: "Audit", schema: auditSchema } },
      ...consoleErrors(503),
    },
  },
  {
    method: "get",
    path: "/admin/agents/overview/charts",
    operationId: "consoleCharts",
    capability: "console",
    summary:
      "The node in charts: registrations per hour, actions per minute, time to confirmation, key stock, findings, service wallet balances.",
    tag: "console",
    security: ["adminApiToken"],
    responses: {
      200: { description: "the charts' data", body: { name: "NodeCharts", schema: nodeChartsSchema } },
      ...consoleErrors(503),
    },
  },
  {
    method: "post",
    path: "/admin/agents/registration/settings",
    operationId: "consoleChangeSettings",
    capability: "console",
    summary: "Change registration settings, with a reason.",
    tag: "console",
    security: ["adminApiToken", "registrationAdminToken"],
    requestBody: { name: "SettingsChangeRequest", schema: settingsChangeRequestSchema },
    responses: {
      200: {
        description: "what changed",
        body: { name: "SettingsChangeResponse", schema: settingsChangeResponseSchema },
      },
      ...consoleErrors(400, 503),
      413: PAYLOAD_TOO_LARGE,
    },
  },
  {
    method: "post",
    path: "/admin/agents/registration/identity",
    operationId: "consoleChangeIdentity",
    capability: "console",
    summary: "Disable, enable or revoke (final) an identity, with a reason.",
    tag: "console",
    security: ["adminApiToken", "registrationAdminToken"],
    requestBody: { name: "IdentityChangeRequest", schema: identityChangeRequestSchema },
    responses: {
      200: {
        description: "what changed",
        body: { name: "IdentityChangeResponse", schema: identityChangeResponseSchema },
      },
      ...consoleErrors(400, 503),
      413: PAYLOAD_TOO_LARGE,
    },
  },
  {
    method: "get",
    path: "/admin/agents/webhooks",
    operationId: "consoleWebhooks",
    capability: "console",
    summary: "Webhook endpoints (never their secrets), each with its latest deliveries.",
    tag: "console",
    security: ["adminApiToken"],
    responses: {
      200: {
        description: "the endpoints",
        body: { name: "WebhooksOverview", schema: webhooksOverviewSchema },
      },
      ...consoleErrors(503),
    },
  },
  {
    method: "post",
    path: "/admin/agents/webhooks",
    operationId: "consoleAddWebhook",
    capability: "console",
    summary: "Add a webhook endpoint, with a reason; the answer shows its secret, once.",
    tag: "console",
    security: ["adminApiToken", "registrationAdminToken"],
    requestBody: { name: "WebhookAddRequest", schema: webhookAddRequestSchema },
    responses: {
      201: {
        description: "the endpoint and its secret",
        body: { name: "WebhookAddResponse", schema: webhookAddResponseSchema },
      },
      ...consoleErrors(400, 503),
      413: PAYLOAD_TOO_LARGE,
    },
  },
  {
    method: "post",
    path: "/admin/agents/webhooks/{endpoint_id}/remove",
    operationId: "consoleRemoveWebhook",
    capability: "console",
    summary: "Remove a webhook endpoint and its deliveries, with a reason.",
    tag: "console",
    security: ["adminApiToken", "registrationAdminToken"],
    requestBody: { name: "WebhookRemoveRequest", schema: webhookRemoveRequestSchema },
    responses: {
      200: {
        description: "removed",
        body: { name: "WebhookRemoveResponse", schema: webhookRemoveResponseSchema },
      },
      ...consoleErrors(400, 503),
      404: errorResponse("not_found: no such endpoint (or feature_disabled: the console is off)"),
      413: PAYLOAD_TOO_LARGE,
    },
  },
  {
    method: "post",
    path: "/admin/agents/webhooks/{endpoint_id}/replay",
    operationId: "consoleReplayWebhook",
    capability: "console",
    summary:
      "Queue one event, the events from one on, or all of an endpoint's events again (same webhook-id), enabling it; with a reason.",
    tag: "console",
    security: ["adminApiToken", "registrationAdminToken"],
    requestBody: { name: "WebhookReplayRequest", schema: webhookReplayRequestSchema },
    responses: {
      200: {
        description: "how many deliveries were queued",
        body: { name: "WebhookReplayResponse", schema: webhookReplayResponseSchema },
      },
      ...consoleErrors(400, 503),
      404: errorResponse("not_found: no such endpoint (or feature_disabled: the console is off)"),
      413: PAYLOAD_TOO_LARGE,
    },
  },
  {
    method: "post",
    path: "/admin/agents/webhooks/{endpoint_id}/rotate-secret",
    operationId: "consoleRotateWebhookSecret",
    capability: "console",
    summary:
      "Give an endpoint a new secret, shown in the answer once; the one it replaces signs beside it for overlap_hours (24 by default, at most 168; 0 for a secret that leaked); with a reason.",
    tag: "console",
    security: ["adminApiToken", "registrationAdminToken"],
    requestBody: { name: "WebhookRotateSecretRequest", schema: webhookRotateSecretRequestSchema },
    responses: {
      200: {
        description: "the new secret, and until when the replaced one still signs",
        body: { name: "WebhookRotateSecretResponse", schema: webhookRotateSecretResponseSchema },
      },
      ...consoleErrors(400, 503),
      404: errorResponse("not_found: no such endpoint (or feature_disabled: the console is off)"),
      413: PAYLOAD_TOO_LARGE,
    },
  },
  ...BROWSE_OPERATIONS,
  {
    method: "get",
    path: "/admin/openapi.json",
    operationId: "consoleOpenApi",
    capability: "console",
    summary:
      "This document: the console's and the operations routes (the public one, at /agent/v1/openapi.json, names none of them).",
    tag: "console",
    security: [],
    responses: {
      200: { description: "the OpenAPI 3.1 document", freeForm: true },
      404: errorResponse("feature_disabled: the console is off on this node"),
    },
  },
  // ─── Operations (private origin only) ────────────────────────────────────────────────────
  {
    method: "get",
    path: "/metrics",
    operationId: "metrics",
    capability: "console",
    summary: "Prometheus metrics, for a scraper holding the admin read token (as a bearer token).",
    tag: "operations",
    security: ["adminApiToken"],
    responses: {
      200: { description: "the Prometheus text format", contentType: "text/plain" },
      ...consoleErrors(),
    },
  },
  {
    method: "get",
    path: "/healthz",
    operationId: "health",
    capability: "health",
    summary: "Health of the database, the chain and the enclave; 503 when the database does not answer.",
    tag: "operations",
    security: [],
    responses: {
      200: { description: "healthy or degraded", freeForm: true },
      503: { description: "the database does not answer", freeForm: true },
    },
  },
];
