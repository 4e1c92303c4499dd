/** The console's browsing routes (origin/console/browse.ts): their part of the route table. */
import { ACTION_STATUSES } from "../../shared/action-status.ts";
import {
  actionPageSchema,
  actionRowSchema,
  agentDetailSchema,
  CURSOR_PATTERN,
  identityPageSchema,
  searchResultSchema,
  settlementPageSchema,
  settlementRowSchema,
} from "../../shared/console-browse-schemas.ts";
import { adminRateLimited, errorResponse, type Operation, type ResponseSpec } from "./operation-types.ts";

const errors = (notFound?: string): Record<number, ResponseSpec> => ({
  400: errorResponse("validation_failed: the message names the parameter to fix"),
  401: errorResponse("admin_auth_failed: a missing or wrong admin token"),
  404: errorResponse(
    notFound
      ? `not_found: ${notFound} (or feature_disabled: the console is off on this node)`
      : "feature_disabled: the console is off on this node (no AGENT_ADMIN_API_TOKEN)",
  ),
  429: adminRateLimited("rate_limited: too many failed admin authentications from this address"),
  500: errorResponse("internal_error"),
  503: errorResponse("service_unavailable: the database does not answer; a retry later is safe"),
});

const PAGE_QUERY: NonNullable<Operation["query"]> = [
  {
    name: "limit",
    description: "rows per page, 1 to 100 (50)",
    schema: { type: "integer", minimum: 1, maximum: 100 },
  },
  {
    name: "cursor",
    description: "the previous page's next_cursor",
    schema: {
      type: "string",
      pattern: CURSOR_PATTERN.source,
    },
  },
];

const read = (operation: Omit<Operation, "method" | "capability" | "tag" | "security">): Operation => ({
  method: "get",
  capability: "console",
  tag: "console",
  security: ["adminApiToken"],
  ...operation,
});

export const BROWSE_OPERATIONS: readonly Operation[] = [
  read({
    path: "/admin/agents/search",
    operationId: "consoleSearch",
    summary:
      "Find an agent, an action or a settlement by agent id, wallet, transaction hash, action id or idempotency key.",
    query: [
      {
        name: "q",
        description:
          "required: a UUID, a wallet (0x and 40 hex), a transaction hash (0x and 64 hex) or an idempotency key; at most 128 characters",
        schema: { type: "string" },
      },
    ],
    responses: {
      200: {
        description: "the matches (exact)",
        body: { name: "ConsoleSearchResult", schema: searchResultSchema },
      },
      ...errors(),
    },
  }),
  read({
    path: "/admin/agents/identities",
    operationId: "consoleIdentities",
    summary: "Every identity, newest first, a page at a time.",
    query: PAGE_QUERY,
    responses: {
      200: { description: "a page", body: { name: "ConsoleIdentityPage", schema: identityPageSchema } },
      ...errors(),
    },
  }),
  read({
    path: "/admin/agents/identities/{agent_id}",
    operationId: "consoleAgent",
    summary:
      "One agent: identity, findings, balance read from the chain, policy and budgets, key batch and drill, latest actions.",
    responses: {
      200: { description: "the agent", body: { name: "ConsoleAgentDetail", schema: agentDetailSchema } },
      ...errors("no such agent"),
    },
  }),
  read({
    path: "/admin/agents/actions",
    operationId: "consoleActions",
    summary:
      "Actions (transfers, faucet payouts, x402 authorizations), newest first, of one agent or all, in one state or any, a page at a time.",
    query: [
      ...PAGE_QUERY,
      { name: "agent_id", description: "only this agent's actions", schema: { type: "string" } },
      {
        name: "status",
        description: "only the actions in this state (`held`: those waiting for an operator's approval)",
        schema: { type: "string", enum: [...ACTION_STATUSES] },
      },
    ],
    responses: {
      200: { description: "a page", body: { name: "ConsoleActionPage", schema: actionPageSchema } },
      ...errors(),
    },
  }),
  read({
    path: "/admin/agents/actions/{action_id}",
    operationId: "consoleAction",
    summary: "One action, with its refusal (code, rule, stored message) when it was refused.",
    responses: {
      200: { description: "the action", body: { name: "ConsoleAction", schema: actionRowSchema } },
      ...errors("no such action"),
    },
  }),
  read({
    path: "/admin/agents/settlements",
    operationId: "consoleSettlements",
    summary: "x402 settlements, newest first, a page at a time.",
    query: PAGE_QUERY,
    responses: {
      200: { description: "a page", body: { name: "ConsoleSettlementPage", schema: settlementPageSchema } },
      ...errors(),
    },
  }),
  read({
    path: "/admin/agents/settlements/{settlement_id}",
    operationId: "consoleSettlement",
    summary: "One x402 settlement, with the agent that paid when it is one of this node's.",
    responses: {
      200: {
        description: "the settlement",
        body: { name: "ConsoleSettlement", schema: settlementRowSchema },
      },
      ...errors("no such settlement"),
    },
  }),
];
