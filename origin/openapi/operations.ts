/**
 * Every route the origin mounts under {base}, one descriptor per endpoint (method, path, the zod
 * schemas its bodies follow, the capability that handles it): the routers register their handlers
 * at it (route.ts), the OpenAPI document is generated from it (document.ts), and the fuzz table
 * (testing/fuzz/routes.ts) takes each route's method, path and body schema from it. Request
 * schemas are the ones the routes parse with; response schemas are the ones the tests check
 * answers against. Nothing here is a second copy of a body schema: a route whose body has no
 * schema yet is documented as a free-form object.
 */
import { CAIP2_NETWORK } from "../../shared/constants.ts";
import {
  actionSchema,
  balanceResponseSchema,
  faucetRequestSchema,
  jsonRpcBatchSchema,
  jsonRpcRequestSchema,
  jsonRpcResponseSchema,
  networkResponseSchema,
  registerRequestSchema,
  registerResponseSchema,
  transferRequestSchema,
  x402AuthorizeRequestSchema,
  x402AuthorizeResponseSchema,
} from "../../shared/gateway-schemas.ts";
import {
  policyCheckRequestSchema,
  policyCheckResponseSchema,
  policyPatchSchema,
  policyResponseSchema,
} from "../../shared/policy-schemas.ts";
import { settlementViewSchema } from "../../shared/settlement-view-schema.ts";
import { tokenRotationRequestSchema, tokenRotationResponseSchema } from "../../shared/token-schemas.ts";
import { CONSOLE_OPERATIONS } from "./console-operations.ts";
import {
  DATABASE_503,
  EDGE_502,
  errorResponse,
  type NamedSchema,
  NO_STORE,
  type Operation,
  PAYLOAD_TOO_LARGE,
  PUBLIC_READS_429,
  RETRY_AFTER,
  type ResponseSpec,
  STATUS_TEXT,
} from "./operation-types.ts";
import { PASSKEY_OPERATIONS } from "./passkey-operations.ts";
import { X402_DISCOVERY_OPERATIONS } from "./x402-discovery-operations.ts";

export type { HttpMethod, NamedSchema, Operation, ResponseSpec, SecurityName } from "./operation-types.ts";

/** Answers any agent route can give besides its own (docs/api.md#error-codes). */
const agentErrors = (...extra: number[]): Record<number, ResponseSpec> => {
  const all: Record<number, ResponseSpec> = {
    401: errorResponse("agent_auth_failed: a bad or revoked token, or a disabled identity"),
    403: errorResponse(
      "agent_capability_required; on money routes also limit_exceeded, recipient_not_allowed, funding_gate_closed, policy_denied (the agent's spending policy: `rule` and `remaining`); on signing routes agent_key_binding_mismatch (the token's wallet and its identity's signing key disagree; nothing was signed)",
    ),
    404: errorResponse("not_found: the gateway switch is off; feature_disabled: the route's switch is off"),
    429: {
      ...errorResponse(
        "rate_limited (either tier), or a money limit (faucet_cooldown, faucet_daily_limit, x402_daily_limit); `retry_after` in seconds",
      ),
      headers: RETRY_AFTER(true),
    },
    500: errorResponse("internal_error"),
    502: errorResponse(EDGE_502),
    503: errorResponse(
      "service_unavailable (the database), chain_unavailable (the chain), agent_signer_unavailable, agent_signer_protocol_unavailable (nothing signed; retry with the same key); on signing routes agent_key_unavailable (the signer does not hold the wallet's key: final for the key, no retry helps until the operator restores the keys)",
    ),
  };
  for (const status of extra) all[status] = errorResponse(STATUS_TEXT[status] ?? "error");
  return all;
};

const action: NamedSchema = { name: "Action", schema: actionSchema };
const policy: NamedSchema = { name: "Policy", schema: policyResponseSchema };
/**
 * A repeat of a key answers what its action came to: the action while in flight or once confirmed,
 * the refusal it ended with otherwise, so a repeat never reads as a success.
 */
const moneyResponses = (): Record<number, ResponseSpec> => ({
  200: { description: "the action, confirmed (a repeat of a request whose action confirmed)", body: action },
  202: {
    description:
      "the action, in flight (poll GET /agent/v1/actions/{action_id}), or `held` for an operator's approval (its `rule`, `expires_at`)",
    body: action,
  },
  ...agentErrors(400),
  429: {
    ...errorResponse(
      "rate_limited (either tier), faucet_cooldown, faucet_daily_limit; `retry_after` in seconds. A repeat of a refused key whose wait is over answers `retry_after: 0` and no Retry-After",
    ),
    headers: RETRY_AFTER(false),
  },
  409: errorResponse(
    "idempotency_conflict: the key was used with a different payload; abandoned: a repeat of a request not retried within 10 minutes, nothing signed (send a new key)",
  ),
  413: PAYLOAD_TOO_LARGE,
  422: errorResponse(
    "insufficient_funds (the amount plus the maximum fee exceeds the balance less pending transfers: `needed_units` and `available_units`, in 6-decimal units, with `needed_wei` and `available_wei`); on a repeat of the key, broadcast_refused (the chain refused the signed transaction) or reverted (mined and reverted, the fee paid)",
  ),
  503: errorResponse(
    "agent_signer_unavailable, chain_unavailable, service_unavailable: nothing was signed, retry with the same idempotency_key (it runs the request again); agent_signer_protocol_unavailable",
  ),
});

const x402FreeForm = (description: string): ResponseSpec => ({ description, freeForm: true });
const X402_RATE_LIMITED =
  "`rate_limited`: a window of the client's is full (AGENT_X402_RATE_LIMIT_PER_MINUTE of refused requests per IPv4 address or IPv6 /64, of signed payments per payer; AGENT_X402_ADDRESS_PAYMENTS_PER_MINUTE of signed payments per address); `invalid_exact_evm_too_many_reverts`: the payer or the address has had 3 settlements revert within 10 minutes; in the route's own shape, with Retry-After";

const X402_CHAIN_UNAVAILABLE =
  "`chain_unavailable`: the chain did not answer; nothing was signed, the same payment may be presented again";
const X402_DATABASE_UNAVAILABLE =
  "`service_unavailable`: the database did not answer; present the same payment again after Retry-After (it settles once)";
/** verify, settle and the paid demo (docs/x402.md#payment-identifiers). */
const X402_ID_CONFLICT =
  "`payment_identifier_conflict`: the payer already gave this `payment-identifier` id to another request (another resource or other terms); nothing was settled";
const SETTLEMENT_VIEW =
  "`{status: claimed | submitted | settled | failed | reverted, payer, payee, amount, network, transaction, block_number, reason?, authorization_used_elsewhere?, updated_at}`; for a failed or reverted one, `authorization_used_elsewhere` true says another relayer's transaction used its authorization and paid the payee, false that the chain holds it unused, null not known (docs/x402.md#settlement-status)";

export const OPERATIONS: readonly Operation[] = [
  // ─── Agent wallet API ─────────────────────────────────────────────────────────────────────
  {
    method: "get",
    path: "/agent/v1/network",
    operationId: "getNetwork",
    capability: "gateway",
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
    capability: "gateway",
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
    capability: "gateway",
    summary:
      "Read-only JSON-RPC proxy: eth_chainId, eth_blockNumber, eth_getBalance, eth_getTransactionByHash, eth_getTransactionReceipt, eth_getBlockByNumber. Other methods get JSON-RPC error -32601 with the allowlist in `data`. A notification (no `id`) is not answered; an id is a string, null or an integer within ±(2^53 − 1), any other -32600 with id null.",
    tag: "agent",
    security: ["agentToken"],
    requestBody: {
      oneOf: [
        { name: "JsonRpcRequest", schema: jsonRpcRequestSchema },
        { name: "JsonRpcBatch", schema: jsonRpcBatchSchema },
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
      204: {
        description:
          "notifications only (one request without an `id`, or a batch of them): JSON-RPC 2.0 answers none, so no body",
      },
      ...agentErrors(),
      413: {
        description: "a body over the /rpc limit: a JSON-RPC error -32600 (id null) with HTTP 413",
        body: { name: "JsonRpcResponse", schema: jsonRpcResponseSchema },
      },
    },
  },
  {
    method: "get",
    path: "/agent/v1/actions/{action_id}",
    operationId: "getAction",
    capability: "gateway",
    summary:
      "One of the caller's own actions; another agent's id is 404 like an unknown one. With `wait`, an action in flight is answered as soon as its status changes, or when the wait ends (docs/events.md#waiting-for-an-action).",
    tag: "agent",
    security: ["agentToken"],
    query: [
      {
        name: "wait",
        description: "seconds to wait for the action's status to change (0 to 30); anything else is 400",
        schema: { type: "integer", minimum: 0, maximum: 30 },
      },
    ],
    responses: { 200: { description: "the action", body: action }, ...agentErrors(400) },
  },
  {
    method: "get",
    path: "/agent/v1/events",
    operationId: "streamEvents",
    capability: "gateway",
    summary:
      "The caller's own events as Server-Sent Events (docs/events.md#the-stream): `id:` the event id, `event:` its type, `data:` `{id, type, occurred_at, data}`; a `: ping` comment every 15 s. Resumes after `Last-Event-ID` or `after`; `after=0` replays every event kept; neither starts from now, and the stream first names that start in a `stream.opened` message whose `id:` a reconnection sends as `Last-Event-ID`. One stream more than AGENT_EVENTS_STREAMS_PER_TOKEN closes the token's oldest. The service ends a stream with a `stream.closed` event naming the reason, among them the stream's token no longer authenticating: `identity_disabled`, `identity_revoked` or `token_rotated`, right after that event.",
    tag: "agent",
    security: ["agentToken"],
    query: [
      {
        name: "after",
        description:
          "resume after this event id (for clients that cannot set Last-Event-ID; the header wins); 0: every event kept",
        schema: { type: "string", pattern: "^[0-9]{1,19}$" },
      },
    ],
    headers: [
      {
        name: "Last-Event-ID",
        description: "resume after this event id, as an EventSource sends it when it reconnects",
        required: false,
      },
    ],
    responses: {
      200: { description: "the stream of events, until the client leaves", contentType: "text/event-stream" },
      ...agentErrors(),
      400: errorResponse(
        "validation_failed: the last event id is not a whole number, or no event of the caller's has it (unknown, or older than the events kept)",
      ),
    },
  },
  {
    method: "get",
    path: "/agent/v1/policy",
    operationId: "getPolicy",
    capability: "gateway",
    summary:
      "The caller's spending policy (null: the node's limits only), and each budget with its limit, what its UTC window used, what remains and when it resets.",
    tag: "agent",
    security: ["agentToken"],
    responses: { 200: { description: "the policy", body: policy }, ...agentErrors() },
  },
  {
    method: "patch",
    path: "/agent/v1/policy",
    operationId: "patchPolicy",
    capability: "gateway",
    summary:
      "Tightens the caller's own policy (capability `transfer`): a JSON merge patch of the document (null removes a field, lists are replaced). Lower a figure, remove a payee, freeze: sealed in the enclave, then stored. A change that allows more is 403 policy_loosening_requires_operator.",
    tag: "agent",
    security: ["agentToken"],
    requestBody: { name: "PolicyPatch", schema: policyPatchSchema },
    responses: {
      200: { description: "the policy as now sealed", body: policy },
      ...agentErrors(400),
      403: errorResponse(
        "agent_capability_required; policy_loosening_requires_operator (`loosens` names the fields): nothing changed",
      ),
      413: PAYLOAD_TOO_LARGE,
    },
  },
  {
    method: "post",
    path: "/agent/v1/policy/check",
    operationId: "checkPolicy",
    capability: "gateway",
    summary:
      "What the caller's policy would answer a transfer (`{transfer: {to, amount}}`) or an x402 payment (`{x402: {payment_required}}`): allow, hold or deny, with the rule and what remains under it. Signs and reserves nothing.",
    tag: "agent",
    security: ["agentToken"],
    requestBody: { name: "PolicyCheckRequest", schema: policyCheckRequestSchema },
    responses: {
      200: { description: "the decision", body: { name: "PolicyCheck", schema: policyCheckResponseSchema } },
      ...agentErrors(400),
      413: PAYLOAD_TOO_LARGE,
    },
  },
  {
    method: "post",
    path: "/agent/v1/token/rotate",
    operationId: "rotateToken",
    capability: "gateway",
    summary:
      "Replaces the caller's token with a new one, shown once (`Cache-Control: no-store`), for the same identity: wallet, capabilities, actions and limits stay. The old token fails from the next request on. Any capability; body `{}`.",
    tag: "agent",
    security: ["agentToken"],
    requestBody: { name: "TokenRotationRequest", schema: tokenRotationRequestSchema },
    responses: {
      200: {
        description: "the new token, shown once; store it before anything else",
        body: { name: "TokenRotation", schema: tokenRotationResponseSchema },
        headers: NO_STORE,
      },
      ...agentErrors(400),
      401: errorResponse(
        "agent_auth_failed: a bad or revoked token, a disabled identity, or a token another rotation replaced first",
      ),
      413: PAYLOAD_TOO_LARGE,
    },
  },
  {
    method: "post",
    path: "/agent/v1/faucet",
    operationId: "faucet",
    capability: "money",
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
    capability: "money",
    summary:
      "A transfer from the assigned wallet (capability `transfer`); `amount` in 6-decimal units. `to` may not be the zero address, a precompile's (0x…0001 to 0x…00ff), the NativeTransferAuth precompile or the operator pool (400 validation_failed, nothing written). The funding gate holds the sender's wallet and, when `to` is another agent wallet of this service, the recipient's too (403 funding_gate_closed; the message names the recipient).",
    tag: "agent",
    security: ["agentToken"],
    requestBody: { name: "TransferRequest", schema: transferRequestSchema },
    responses: moneyResponses(),
  },
  {
    method: "post",
    path: "/agent/v1/x402/authorize",
    operationId: "authorizeX402",
    capability: "x402",
    summary:
      "Signs an x402 payment authorization for a quote (capability `transfer`): body `{payment_required, nonce?, idempotency_key?}` (with neither, the key is derived from the agent, the resource and the quote, and the nonce from the key; the key is named in the `Idempotency-Key` header), answer `{action_id, payment_signature, payment_payload, valid_before}`.",
    tag: "x402",
    security: ["agentToken"],
    requestBody: { name: "X402AuthorizeRequest", schema: x402AuthorizeRequestSchema },
    responses: {
      200: {
        description: "the signed authorization; a repeat returns the same bytes",
        body: { name: "X402Authorization", schema: x402AuthorizeResponseSchema },
      },
      202: {
        description:
          "held: the agent's spending policy asks an operator's approval first (the action, status `held`, with `rule` and `expires_at`); nothing signed. The same request again after the approval signs it",
        body: action,
      },
      ...agentErrors(400, 409),
      400: errorResponse(
        "validation_failed, also for a quote past its bounds (`resource` 6 KiB, `accepts` 16 entries of 4 KiB, `extensions` 16 KiB, as JSON)",
      ),
      413: PAYLOAD_TOO_LARGE,
      422: errorResponse(
        "x402_amount_not_allowed, x402_pay_to_not_allowed, x402_validity_too_long, x402_requirement_unsupported: no entry of the quote can be paid under the node's terms",
      ),
      429: {
        ...errorResponse(
          "rate_limited (either tier); x402_daily_limit: AGENT_X402_DAILY_LIMIT authorizations signed today, nothing written, `retry_after` to the next UTC day (a repeat of a refused key whose wait is over: `retry_after: 0`, no Retry-After)",
        ),
        headers: RETRY_AFTER(false),
      },
    },
  },
  {
    method: "get",
    path: "/agent/v1/openapi.json",
    operationId: "getOpenApi",
    capability: "openapi",
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
    capability: "registration",
    summary:
      "Issues a token and an empty assigned wallet (capabilities read and transfer). Never retry automatically: a lost answer may already have created the identity.",
    tag: "registration",
    security: [],
    headers: [
      { name: "X-SVC-Registration", description: "must be `1`", required: true },
      {
        name: "X-svc-Registration-Proof",
        description:
          "with the proof of work on: `<challenge>.<solution>` answering a 428's `challenge` (docs/security.md)",
        required: false,
      },
    ],
    requestBody: { name: "RegisterRequest", schema: registerRequestSchema },
    responses: {
      201: {
        description: "the new identity; the token is shown once",
        body: { name: "Registration", schema: registerResponseSchema },
        headers: NO_STORE,
      },
      400: errorResponse(STATUS_TEXT[400]!),
      403: errorResponse("cross_site_refused, registration_ingress_refused"),
      404: errorResponse("not_found: the gateway switch is off"),
      413: PAYLOAD_TOO_LARGE,
      428: errorResponse(
        "registration_proof_required, with a fresh `challenge`, its `bits` and `expires_in` (proof of work on)",
      ),
      429: { ...errorResponse("registration_rate_limited, with Retry-After"), headers: RETRY_AFTER(true) },
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
    capability: "x402",
    summary: "Demo paid resource: unpaid gives 402 with the quote; repeat with PAYMENT-SIGNATURE to pay.",
    tag: "x402",
    security: [],
    headers: [{ name: "PAYMENT-SIGNATURE", description: "Base64 of the payment envelope", required: false }],
    responses: {
      200: {
        ...x402FreeForm("the paid resource, after the settlement is included with status 0x1"),
        headers: { "PAYMENT-RESPONSE": { description: "Base64 of the settlement", required: true } },
      },
      402: {
        ...x402FreeForm(
          "the quote `{x402Version, resource, accepts, error?}`; PAYMENT-RESPONSE after every settle that did not pay (refused on the chain's facts, pending, failed, or a payment presented again)",
        ),
        headers: {
          "PAYMENT-REQUIRED": { description: "Base64 of the quote in the body", required: true },
          "PAYMENT-RESPONSE": {
            description: "Base64 of the settlement, after a settle that did not pay",
            required: false,
          },
        },
      },
      409: x402FreeForm(`the quote, its \`error\` ${X402_ID_CONFLICT}`),
      429: { ...x402FreeForm(X402_RATE_LIMITED), headers: RETRY_AFTER(true) },
      404: errorResponse("not_found / feature_disabled"),
      500: errorResponse("internal_error"),
      502: errorResponse(EDGE_502),
      503: DATABASE_503,
    },
  },
  // ─── Webhooks ─────────────────────────────────────────────────────────────────────────────
  {
    method: "get",
    path: "/.well-known/webhooks/keys",
    operationId: "webhookKeys",
    capability: "webhooks",
    summary:
      'The public keys of the webhooks\' `v1a` (Ed25519) signatures (docs/api.md#webhooks): `{"keys": [{"kty": "OKP", "crv": "Ed25519", "x", "kid"}]}`.',
    tag: "webhooks",
    security: [],
    responses: {
      200: { description: "the key set", freeForm: true },
      404: errorResponse("not_found: the gateway switch is off"),
      502: errorResponse(EDGE_502),
    },
  },
  {
    method: "get",
    path: "/x402/facilitator/supported",
    operationId: "x402Supported",
    capability: "x402",
    summary: `Facilitator capabilities \`{kinds: [{x402Version: 2, scheme: "exact", network: "${CAIP2_NETWORK}", extra}]}\`.`,
    tag: "x402",
    security: [],
    responses: {
      200: x402FreeForm("the supported kinds"),
      404: errorResponse("not_found / feature_disabled"),
      502: errorResponse(EDGE_502),
    },
  },
  {
    method: "post",
    path: "/x402/facilitator/verify",
    operationId: "x402Verify",
    capability: "x402",
    summary:
      "Verify a payment: `{x402Version: 2, paymentPayload, paymentRequirements}` → `{isValid, invalidReason, payer}`.",
    tag: "x402",
    security: [],
    requestBody: { freeForm: true },
    responses: {
      200: x402FreeForm(
        "the verification; a failure is data (`isValid: false`), a body whose own x402Version is not 2 `invalid_x402_version`",
      ),
      400: x402FreeForm("a malformed request"),
      409: x402FreeForm(`\`isValid: false\`, \`invalidReason\` ${X402_ID_CONFLICT}`),
      413: x402FreeForm("a body over 64 KiB, refused before it is read whole"),
      429: { ...x402FreeForm(X402_RATE_LIMITED), headers: RETRY_AFTER(true) },
      503: x402FreeForm(`${X402_CHAIN_UNAVAILABLE}; ${X402_DATABASE_UNAVAILABLE}`),
      404: errorResponse("not_found / feature_disabled"),
      502: errorResponse(EDGE_502),
    },
  },
  {
    method: "post",
    path: "/x402/facilitator/settle",
    operationId: "x402Settle",
    capability: "x402",
    summary:
      "Settle a payment: `{x402Version: 2, paymentPayload, paymentRequirements}` → `{success, errorReason, transaction, network, payer}`.",
    tag: "x402",
    security: [],
    requestBody: { freeForm: true },
    responses: {
      200: x402FreeForm("the settlement, `success: true` only: a settle that did not pay is never 200"),
      400: x402FreeForm(
        "`success: false` with its `errorReason`: a malformed request, a payment the checks refuse (its signature, terms, window, balance, a used nonce), or one whose settlement ended without moving money (`broadcast_refused`, `invalid_exact_evm_transaction_failed`)",
      ),
      409: x402FreeForm(`\`success: false\`, \`errorReason\` ${X402_ID_CONFLICT}`),
      413: x402FreeForm("a body over 64 KiB, refused before it is read whole"),
      429: { ...x402FreeForm(X402_RATE_LIMITED), headers: RETRY_AFTER(true) },
      503: x402FreeForm(
        `${X402_CHAIN_UNAVAILABLE}; ${X402_DATABASE_UNAVAILABLE}; \`unexpected_settle_error\`: the signer did not sign`,
      ),
      504: x402FreeForm(
        "`settlement_pending`: broadcast, its receipt not in yet; `transaction` names it and `errorMessage` and `extra.statusUrl` the settlement's status route; present the same payment again, never a new one",
      ),
      404: errorResponse("not_found / feature_disabled"),
      502: errorResponse(EDGE_502),
    },
  },
  {
    method: "get",
    path: "/x402/facilitator/settlements/tx/{hash}",
    operationId: "x402SettlementByTransaction",
    capability: "x402",
    summary: `A settlement by its transaction's hash: ${SETTLEMENT_VIEW}.`,
    tag: "x402",
    security: [],
    responses: {
      200: { description: "the settlement", body: { name: "X402Settlement", schema: settlementViewSchema } },
      400: errorResponse("validation_failed: not a 32-byte hex hash"),
      404: errorResponse("not_found: no settlement has that transaction; feature_disabled"),
      429: PUBLIC_READS_429,
      502: errorResponse(EDGE_502),
      503: DATABASE_503,
    },
  },
  {
    method: "get",
    path: "/x402/facilitator/settlements/{payer}/{nonce}",
    operationId: "x402SettlementByPayment",
    capability: "x402",
    summary: `A settlement by its payment's (from, nonce): ${SETTLEMENT_VIEW}.`,
    tag: "x402",
    security: [],
    responses: {
      200: { description: "the settlement", body: { name: "X402Settlement", schema: settlementViewSchema } },
      400: errorResponse("validation_failed: not a 20-byte hex payer or a 32-byte hex nonce"),
      404: errorResponse("not_found: no settlement of that payment is known; feature_disabled"),
      429: PUBLIC_READS_429,
      502: errorResponse(EDGE_502),
      503: DATABASE_503,
    },
  },
  ...X402_DISCOVERY_OPERATIONS,
  ...CONSOLE_OPERATIONS,
  ...PASSKEY_OPERATIONS,
];
