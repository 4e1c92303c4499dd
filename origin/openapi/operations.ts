/**
 * Every route the origin mounts under {base}, with the zod schemas its bodies follow: the source
 * of the OpenAPI document (document.ts). Request schemas are the ones the routes parse with;
 * response schemas are the ones the tests check answers against. Nothing here is a second copy
 * of a body schema: a route whose body has no schema yet is documented as a free-form object.
 */
import type { z } from "zod";
import {
  auditSchema,
  identityChangeRequestSchema,
  identityChangeResponseSchema,
  operationsOverviewSchema,
  registrationOverviewSchema,
  settingsChangeRequestSchema,
  settingsChangeResponseSchema,
} from "../../shared/console-schemas.ts";
import {
  actionSchema,
  balanceResponseSchema,
  errorBodySchema,
  faucetRequestSchema,
  jsonRpcRequestSchema,
  jsonRpcResponseSchema,
  networkResponseSchema,
  registerRequestSchema,
  registerResponseSchema,
  transferRequestSchema,
} from "../../shared/gateway-schemas.ts";

export type HttpMethod = "get" | "post";
export type SecurityName = "agentToken" | "adminApiToken" | "registrationAdminToken";

/** A named schema becomes `#/components/schemas/{name}`. */
export type NamedSchema = { name: string; schema: z.ZodType };

export type ResponseSpec = {
  description: string;
  /** application/json unless `contentType` says otherwise. */
  body?: NamedSchema | { array: NamedSchema } | { oneOf: Array<NamedSchema | { array: NamedSchema }> };
  /** A body that is not JSON (HTML, CSS, the Prometheus text format). */
  contentType?: string;
  /** Any JSON object: a body whose schema lives outside this repository (x402's own shapes). */
  freeForm?: true;
};

export type Operation = {
  method: HttpMethod;
  /** Relative to {base}, OpenAPI style: `/agent/v1/actions/{action_id}`. */
  path: string;
  operationId: string;
  summary: string;
  tag: "agent" | "registration" | "x402" | "console" | "operations";
  /** Every listed scheme is required together (an AND); none = public. */
  security: SecurityName[];
  requestBody?: NamedSchema | { oneOf: Array<NamedSchema | { array: NamedSchema }> } | { freeForm: true };
  /** Extra request headers the route requires. */
  headers?: Array<{ name: string; description: string; required: boolean }>;
  responses: Record<number, ResponseSpec>;
};

const error: NamedSchema = { name: "Error", schema: errorBodySchema };
const errorResponse = (description: string): ResponseSpec => ({ description, body: error });

/** Answers any agent route can give besides its own (SPEC "Errors", DESIGN §7). */
const agentErrors = (...extra: number[]): Record<number, ResponseSpec> => {
  const all: Record<number, ResponseSpec> = {
    401: errorResponse("agent_auth_failed: a bad or revoked token, or a disabled identity"),
    403: errorResponse(
      "agent_capability_required; on money routes also limit_exceeded, recipient_not_allowed, funding_gate_closed",
    ),
    404: errorResponse("not_found: the gateway switch is off; feature_disabled: the route's switch is off"),
    429: errorResponse("rate_limited (either tier), or a money limit; `retry_after` in seconds"),
    500: errorResponse("internal_error"),
    502: errorResponse(EDGE_502),
    503: errorResponse("service_unavailable, agent_signer_unavailable, agent_signer_protocol_unavailable"),
  };
  for (const status of extra) all[status] = errorResponse(STATUS_TEXT[status] ?? "error");
  return all;
};

/** The edge answers 502 itself when the origin does not (edge-worker/proxy.ts). */
const EDGE_502 = "upstream_unavailable: the chain did not answer, or the edge could not reach the origin";

const STATUS_TEXT: Record<number, string> = {
  400: "validation_failed: the message names the field to fix",
  409: "idempotency_conflict: the key was used with a different payload",
  422: "insufficient_funds (the amount plus the maximum fee exceeds the balance)",
};

const action: NamedSchema = { name: "Action", schema: actionSchema };
const moneyResponses = (): Record<number, ResponseSpec> => ({
  200: { description: "the action, terminal; or the stored action on a repeat", body: action },
  202: { description: "the action, in flight: poll GET /agent/v1/actions/{action_id}", body: action },
  ...agentErrors(400, 409, 422),
});

const consoleErrors = (...extra: number[]): Record<number, ResponseSpec> => {
  const all: Record<number, ResponseSpec> = {
    401: errorResponse("admin_auth_failed: a missing or wrong admin token"),
    404: errorResponse("feature_disabled: the console is off on this node (no AGENT_ADMIN_API_TOKEN)"),
    429: errorResponse("rate_limited: too many failed admin authentications from this address"),
    500: errorResponse("internal_error"),
  };
  for (const status of extra) all[status] = errorResponse(STATUS_TEXT[status] ?? "error");
  return all;
};

const x402FreeForm = (description: string): ResponseSpec => ({ description, freeForm: true });

export const OPERATIONS: readonly Operation[] = [
  // ─── Agent wallet API ─────────────────────────────────────────────────────────────────────
  {
    method: "get",
    path: "/agent/v1/network",
    operationId: "getNetwork",
    summary: "Discovery: chain, the caller's identity, the RPC allowlist, limits and features. Call first.",
    tag: "agent",
    security: ["agentToken"],
    responses: {
      200: { description: "the network", body: { name: "Network", schema: networkResponseSchema } },
      ...agentErrors(),
    },
  },
  {
    method: "get",
    path: "/agent/v1/balance",
    operationId: "getBalance",
    summary: "The assigned wallet's balance, in 6-decimal units and in wei.",
    tag: "agent",
    security: ["agentToken"],
    responses: {
      200: { description: "the balance", body: { name: "Balance", schema: balanceResponseSchema } },
      ...agentErrors(),
    },
  },
  {
    method: "post",
    path: "/agent/v1/rpc",
    operationId: "rpc",
    summary:
      "Read-only JSON-RPC proxy: eth_chainId, eth_blockNumber, eth_getBalance, eth_getTransactionByHash, eth_getTransactionReceipt, eth_getBlockByNumber. Other methods get JSON-RPC error -32601 with the allowlist in `data`.",
    tag: "agent",
    security: ["agentToken"],
    requestBody: {
      oneOf: [
        { name: "JsonRpcRequest", schema: jsonRpcRequestSchema },
        { array: { name: "JsonRpcRequest", schema: jsonRpcRequestSchema } },
      ],
    },
    responses: {
      200: {
        description: "JSON-RPC 2.0 answers (errors too, with HTTP 200)",
        body: {
          oneOf: [
            { name: "JsonRpcResponse", schema: jsonRpcResponseSchema },
            { array: { name: "JsonRpcResponse", schema: jsonRpcResponseSchema } },
          ],
        },
      },
      ...agentErrors(),
    },
  },
  {
    method: "get",
    path: "/agent/v1/actions/{action_id}",
    operationId: "getAction",
    summary: "One of the caller's own actions; another agent's id is 404 like an unknown one.",
    tag: "agent",
    security: ["agentToken"],
    responses: { 200: { description: "the action", body: action }, ...agentErrors() },
  },
  {
    method: "post",
    path: "/agent/v1/faucet",
    operationId: "faucet",
    summary: "A faucet payout to the caller's own assigned wallet (capability `faucet`).",
    tag: "agent",
    security: ["agentToken"],
    requestBody: { name: "FaucetRequest", schema: faucetRequestSchema },
    responses: moneyResponses(),
  },
  {
    method: "post",
    path: "/agent/v1/transfers",
    operationId: "transfer",
    summary: "A transfer from the assigned wallet (capability `transfer`); `amount` in 6-decimal units.",
    tag: "agent",
    security: ["agentToken"],
    requestBody: { name: "TransferRequest", schema: transferRequestSchema },
    responses: moneyResponses(),
  },
  {
    method: "post",
    path: "/agent/v1/x402/authorize",
    operationId: "authorizeX402",
    summary:
      "Signs an x402 payment authorization for a quote (capability `transfer`): body `{payment_required, nonce, idempotency_key?}`, answer `{action_id, payment_signature, payment_payload, valid_before}`.",
    tag: "x402",
    security: ["agentToken"],
    requestBody: { freeForm: true },
    responses: {
      200: x402FreeForm("the signed authorization; a repeat returns the same bytes"),
      ...agentErrors(400, 409, 422),
    },
  },
  {
    method: "get",
    path: "/agent/v1/openapi.json",
    operationId: "getOpenApi",
    summary: "This document.",
    tag: "agent",
    security: [],
    responses: {
      200: { description: "the OpenAPI 3.1 document", freeForm: true },
      404: errorResponse("not_found: the gateway switch is off"),
      502: errorResponse(EDGE_502),
    },
  },
  // ─── Registration ────────────────────────────────────────────────────────────────────────
  {
    method: "post",
    path: "/agent/v1/register",
    operationId: "register",
    summary:
      "Issues a token and an empty assigned wallet (capabilities read and transfer). Never retry automatically: a lost answer may already have created the identity.",
    tag: "registration",
    security: [],
    headers: [{ name: "X-SVC-Registration", description: "must be `1`", required: true }],
    requestBody: { name: "RegisterRequest", schema: registerRequestSchema },
    responses: {
      201: {
        description: "the new identity; the token is shown once",
        body: { name: "Registration", schema: registerResponseSchema },
      },
      400: errorResponse(STATUS_TEXT[400]!),
      403: errorResponse("cross_site_refused, registration_ingress_refused"),
      404: errorResponse("not_found: the gateway switch is off"),
      429: errorResponse("registration_rate_limited, with Retry-After"),
      500: errorResponse("internal_error"),
      502: errorResponse(EDGE_502),
      503: errorResponse("registration_unavailable, with a `reason`"),
    },
  },
  // ─── x402 surfaces (x402 version 2 shapes, as the official @x402/* packages read them) ────
  {
    method: "get",
    path: "/x402/demo",
    operationId: "x402Demo",
    summary: "Demo paid resource: unpaid gives 402 with the quote; repeat with PAYMENT-SIGNATURE to pay.",
    tag: "x402",
    security: [],
    headers: [{ name: "PAYMENT-SIGNATURE", description: "Base64 of the payment envelope", required: false }],
    responses: {
      200: x402FreeForm("the paid resource, after the settlement is included with status 0x1"),
      402: x402FreeForm(
        "the quote `{x402Version, resource, accepts, error?}`; PAYMENT-RESPONSE after a failed settle",
      ),
      404: errorResponse("not_found / feature_disabled"),
      500: errorResponse("internal_error"),
      502: errorResponse(EDGE_502),
    },
  },
  {
    method: "get",
    path: "/x402/facilitator/supported",
    operationId: "x402Supported",
    summary:
      'Facilitator capabilities `{kinds: [{x402Version: 2, scheme: "exact", network: "eip155:77", extra}]}`.',
    tag: "x402",
    security: [],
    responses: {
      200: x402FreeForm("the supported kinds"),
      404: errorResponse("not_found / feature_disabled"),
    },
  },
  {
    method: "post",
    path: "/x402/facilitator/verify",
    operationId: "x402Verify",
    summary:
      "Verify a payment: `{x402Version: 2, paymentPayload, paymentRequirements}` → `{isValid, invalidReason, payer}`.",
    tag: "x402",
    security: [],
    requestBody: { freeForm: true },
    responses: {
      200: x402FreeForm("the verification"),
      400: x402FreeForm("a malformed request"),
      404: errorResponse("not_found / feature_disabled"),
    },
  },
  {
    method: "post",
    path: "/x402/facilitator/settle",
    operationId: "x402Settle",
    summary: "Settle a payment → `{success, errorReason, transaction, network, payer}`.",
    tag: "x402",
    security: [],
    requestBody: { freeForm: true },
    responses: {
      200: x402FreeForm("the settlement"),
      400: x402FreeForm("a malformed request"),
      404: errorResponse("not_found / feature_disabled"),
    },
  },
  // ─── Operator console (private origin only) ─────────────────────────────────────────────
  {
    method: "get",
    path: "/admin/agents",
    operationId: "consolePage",
    summary: "The console's HTML shell, without operational data.",
    tag: "console",
    security: [],
    responses: {
      200: { description: "HTML", contentType: "text/html" },
      404: errorResponse("feature_disabled: the console is off on this node"),
    },
  },
  ...(["console.js", "console.css"] as const).map(
    (asset): Operation => ({
      method: "get",
      path: `/admin/agents/assets/${asset}`,
      operationId: asset === "console.js" ? "consoleScript" : "consoleStyle",
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
    summary: "Every recorded change, newest first.",
    tag: "console",
    security: ["adminApiToken"],
    responses: {
      200: { description: "the audit", body: { name: "Audit", schema: auditSchema } },
      ...consoleErrors(503),
    },
  },
  {
    method: "post",
    path: "/admin/agents/registration/settings",
    operationId: "consoleChangeSettings",
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
    },
  },
  {
    method: "post",
    path: "/admin/agents/registration/identity",
    operationId: "consoleChangeIdentity",
    summary: "Disable or enable an identity, with a reason.",
    tag: "console",
    security: ["adminApiToken", "registrationAdminToken"],
    requestBody: { name: "IdentityChangeRequest", schema: identityChangeRequestSchema },
    responses: {
      200: {
        description: "what changed",
        body: { name: "IdentityChangeResponse", schema: identityChangeResponseSchema },
      },
      ...consoleErrors(400, 503),
    },
  },
  // ─── Operations (private origin only) ────────────────────────────────────────────────────
  {
    method: "get",
    path: "/metrics",
    operationId: "metrics",
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
    summary: "Health of the database, the chain and the enclave; 503 when the database does not answer.",
    tag: "operations",
    security: [],
    responses: {
      200: { description: "healthy or degraded", freeForm: true },
      503: { description: "the database does not answer", freeForm: true },
    },
  },
];
