/**
 * The MCP server of the agent wallet (docs/agents.md, "The agent's tools"): the gateway client's read and
 * money calls as MCP tools. No tool wraps x402 authorization (the MCP adapter does not wrap the
 * authorize endpoint). The token is the server's, from its environment: it is never a tool
 * argument, and no tool result carries it (neither the gateway's answers nor its error objects
 * contain it). An error result is the service's whole error object with the class's name; a
 * faucet or transfer that ends failed or reverted is an error result, never a success. The
 * spending-policy tools answer structured results (an output schema and `structuredContent`); a
 * transfer the policy holds is a result (the action, `held`, its `rule` and `expires_at`), and one it
 * refuses an error naming `rule` and `remaining`.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import * as z from "zod";
import {
  createGatewayClient,
  errorFromAction,
  type FetchLike,
  type GatewayClient,
  GatewayError,
  type PaymentRequired,
  type PolicyPatch,
  RpcError,
  ValidationFailed,
} from "../client/index.ts";
import { RPC_READ_ALLOWLIST } from "../shared/constants.ts";
import { idempotencyKeySchema } from "../shared/gateway-schemas.ts";
import { policyCheckResponseSchema, policyResponseSchema } from "../shared/policy-schemas.ts";
import { DEFAULT_HOST_TIMEOUT_SECONDS, toolCallTimings } from "./host-timeout.ts";

export const MCP_TOOLS = [
  "network",
  "balance",
  "rpc",
  "faucet",
  "transfer",
  "action_status",
  "get_policy",
  "check_policy",
  "update_policy",
] as const;

/** Where the server's gateway is and how it is reached; the token is the server's, from its environment. */
export type WalletMcpGateway = { baseUrl: string; token: string; fetch?: FetchLike };

/**
 * A tool call's time, fitted inside the host's request timeout (host-timeout.ts). A gateway (or a
 * proxy before it) that stalls past the deadline answers the call as a ServiceUnavailable
 * `gateway_timeout` naming the money request's idempotency key, which the host would otherwise
 * never see: its own timeout ends the call with no result, and a call made again without the key
 * could pay twice.
 */
export type WalletMcpOptions = { hostTimeoutSeconds?: number };

/** Named as fetch names the abort of a timeout signal, so the client words it as `gateway_timeout`. */
class ToolCallTimedOut extends Error {
  override readonly name = "TimeoutError";
}

/** What a retry of a money call does, as the client's error classes say it (client/errors.ts). */
const RETRY_RULE =
  "An error named SignerUnavailable or ServiceUnavailable (agent_signer_unavailable, chain_unavailable, service_unavailable, no answer): nothing was signed, or the answer was lost; call again with the same idempotency_key (it is in the error), which never pays twice. Any other error that names an action_id (limit_exceeded, insufficient_funds, funding_gate_closed, faucet_cooldown, reverted, …) is final for that key: the same key answers the same error; send a new request with a new key once the cause is gone.";

export function createWalletMcpServer(
  gateway: WalletMcpGateway,
  version: string,
  options: WalletMcpOptions = {},
): McpServer {
  const { deadlineMs, waitUntilEndedMs, maxWaitSeconds } = toolCallTimings(
    options.hostTimeoutSeconds ?? DEFAULT_HOST_TIMEOUT_SECONDS,
  );
  const server = new McpServer({ name: "agent-wallet", version });
  const baseFetch: FetchLike = gateway.fetch ?? globalThis.fetch.bind(globalThis);
  /**
   * One tool call with a client whose every request ends at the call's deadline: a retry after it
   * fails at once, so the money call throws with its key in time.
   * `cancelled`: the SDK's signal of the call, aborted when the host cancels it
   * (notifications/cancelled; its answer then goes to nobody). The request under way is aborted and
   * no retry or further read is made: a transfer a person stopped during a retry's pause was sent
   * again after it, and a wait went on to its end.
   * `structured`: the tool declares an output schema, so the answer goes in structuredContent too.
   */
  const run = async (
    cancelled: AbortSignal,
    call: (client: GatewayClient) => Promise<unknown>,
    structured = false,
  ): Promise<CallToolResult> => {
    const deadline = new AbortController();
    const timer = setTimeout(
      () =>
        deadline.abort(
          new ToolCallTimedOut(
            `no whole answer within ${deadlineMs / 1000} s, the longest a tool call waits`,
          ),
        ),
      deadlineMs,
    );
    const fetch: FetchLike = (input, init) =>
      baseFetch(input, {
        ...init,
        signal: AbortSignal.any([...(init?.signal ? [init.signal] : []), deadline.signal, cancelled]),
      });
    // A pause past the deadline would end the call after the host has given up on it.
    const client = createGatewayClient({
      baseUrl: gateway.baseUrl,
      token: gateway.token,
      fetch,
      retryDeadline: Date.now() + deadlineMs,
      stop: cancelled,
    });
    try {
      const answer = await call(client);
      return {
        content: [{ type: "text", text: JSON.stringify(answer, null, 2) }],
        ...(structured ? { structuredContent: answer as Record<string, unknown> } : {}),
      };
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      // The service's whole error object (limit, limit_units, remaining_units, reason, action_id, …).
      const described = {
        error: {
          ...error.body,
          name: error.name,
          code: error.code,
          message: error.message,
          ...(error.status === undefined ? {} : { status: error.status }),
          // RateLimited's wait, or a 503's Retry-After: when calling again can succeed.
          ...(error.retryAfter === undefined ? {} : { retry_after: error.retryAfter }),
          ...(error.idempotencyKey === undefined ? {} : { idempotency_key: error.idempotencyKey }),
          // The JSON-RPC error of an rpc call (its code and data, beside `code: rpc_error`): whether the
          // chain refused the call as given (-32602) or the gateway could not reach it (-32000).
          ...(error instanceof RpcError
            ? { rpc_code: error.rpcCode, ...(error.data === undefined ? {} : { data: error.data }) }
            : {}),
        },
      };
      return { isError: true, content: [{ type: "text", text: JSON.stringify(described, null, 2) }] };
    } finally {
      clearTimeout(timer);
    }
  };
  const idempotencyKey = idempotencyKeySchema
    .optional()
    .describe(
      "Reuse the key of a call whose answer was lost, or that was a SignerUnavailable or ServiceUnavailable error; generated when absent, returned in the result and in an error.",
    );
  /** A failed or reverted action is the error of its class (client errorFromAction), not a result. */
  const outcome = <T extends { action_id: string; status: string; error_code: string | null }>(
    action: T,
  ): T => {
    const failed = errorFromAction(action);
    if (failed) throw failed;
    return action;
  };

  server.registerTool(
    "network",
    {
      description:
        "Discovery: chain 77, this agent's id, wallet and capabilities, the rpc allowlist, limits, features.",
      inputSchema: {},
    },
    (_args, { signal }) => run(signal, (client) => client.network()),
  );
  server.registerTool(
    "balance",
    {
      description: "The agent wallet's balance: `balance` in 6-decimal USDC units, `balance_wei` on chain.",
      inputSchema: {},
    },
    (_args, { signal }) => run(signal, (client) => client.balance()),
  );
  server.registerTool(
    "rpc",
    {
      description: "One read-only JSON-RPC call on chain 77, through the gateway's allowlist.",
      inputSchema: {
        method: z.enum(RPC_READ_ALLOWLIST),
        params: z.array(z.unknown()).default([]).describe('JSON-RPC params, e.g. ["0x…", "latest"]'),
      },
    },
    ({ method, params }, { signal }) => run(signal, (client) => client.rpc(method, params)),
  );
  server.registerTool(
    "faucet",
    {
      description: `A faucet payout to the agent's own wallet (needs the faucet capability). ${RETRY_RULE}`,
      inputSchema: { idempotency_key: idempotencyKey },
    },
    ({ idempotency_key }, { signal }) =>
      run(signal, (client) => client.faucet({ idempotencyKey: idempotency_key })),
  );
  server.registerTool(
    "transfer",
    {
      description: `Transfer USDC from the agent's wallet; then action_status (wait) until confirmed. A transfer the spending policy holds for a person's approval answers the action with status "held", its rule and expires_at: nothing is signed until an operator approves it (action_status follows it; it ends rejected or expired otherwise). One the policy refuses is a PolicyDenied error naming rule and remaining. ${RETRY_RULE}`,
      inputSchema: {
        to: z
          .string()
          .regex(/^0x[0-9a-fA-F]{40}$/)
          .describe("recipient address"),
        amount: z
          .string()
          .regex(/^[1-9][0-9]*$/)
          .describe('6-decimal units as a decimal string: 1 USDC = "1000000"'),
        idempotency_key: idempotencyKey,
      },
    },
    ({ to, amount, idempotency_key }, { signal }) =>
      run(signal, (client) => client.transfer({ to, amount, idempotencyKey: idempotency_key })),
  );
  server.registerTool(
    "action_status",
    {
      description: `A faucet or transfer action's status (requested, held, approved, signed, submitted, confirmed); an action that ended failed or reverted is an error result naming its code, and a held one an operator rejected or let expire a PolicyDenied error naming its rule. With wait as a number of seconds, the answer comes as soon as the status changes from what it is now (or at once if it has ended), else when those seconds pass with it unchanged; with wait true, once the action ends, or after ${waitUntilEndedMs / 1000} s a ServiceUnavailable wait_timeout error naming the status it is still in (call again to go on waiting).`,
      inputSchema: {
        action_id: z.string().uuid(),
        wait: z
          .union([z.boolean(), z.number().int().min(0).max(maxWaitSeconds)])
          .default(false)
          .describe(
            `seconds (0 to ${maxWaitSeconds}): answer on the next change of status, or after that long unchanged; true: wait (up to ${waitUntilEndedMs / 1000} s) until it ends: confirmed, failed or reverted (an x402 authorization at signed)`,
          ),
      },
    },
    ({ action_id, wait }, { signal }) =>
      run(signal, async (client) => {
        if (wait === true) return client.waitForAction(action_id, { timeoutMs: waitUntilEndedMs });
        const waitSeconds = typeof wait === "number" && wait > 0 ? wait : undefined;
        return outcome(await client.action(action_id, { waitSeconds }));
      }),
  );
  server.registerTool(
    "get_policy",
    {
      description:
        "The agent's spending policy (null: the node's limits alone apply), its version, whether the node is frozen, and each budget: its rule, limit, what its window used, what remains and when it resets (UTC).",
      inputSchema: {},
      outputSchema: policyResponseSchema.shape,
    },
    (_args, { signal }) => run(signal, (client) => client.policy(), true),
  );
  server.registerTool(
    "check_policy",
    {
      description:
        "What a transfer, or an x402 payment of a 402 quote, would meet now under the spending policy: decision allow, hold (a person approves it first) or deny, the rule that decided and what remains under it. Signs and reserves nothing. Give exactly one of transfer or payment_required.",
      inputSchema: {
        transfer: z
          .object({
            to: z
              .string()
              .regex(/^0x[0-9a-fA-F]{40}$/)
              .describe("recipient address"),
            amount: z
              .string()
              .regex(/^[1-9][0-9]*$/)
              .describe('6-decimal units as a decimal string: 1 USDC = "1000000"'),
          })
          .optional(),
        payment_required: z
          .record(z.string(), z.unknown())
          .optional()
          .describe("an x402 quote: the 402 answer's body ({x402Version, resource, accepts, …})"),
      },
      outputSchema: policyCheckResponseSchema.shape,
    },
    ({ transfer, payment_required }, { signal }) =>
      run(
        signal,
        async (client) => {
          if ((transfer === undefined) === (payment_required === undefined)) {
            throw new ValidationFailed("give exactly one of transfer or payment_required", {
              code: "validation_failed",
            });
          }
          return client.checkPolicy(
            transfer
              ? { transfer }
              : { x402: { paymentRequired: payment_required as unknown as PaymentRequired } },
          );
        },
        true,
      ),
  );
  server.registerTool(
    "update_policy",
    {
      description:
        'Tighten the agent\'s own spending policy with a JSON merge patch of the document (null removes a field, lists are replaced): lower a figure (units as decimal strings), remove a payee or an allowed recipient, add a denied one, set approval_above_units, freeze ({"frozen": true}). A change that allows more is a PolicyLooseningRequiresOperator error and changes nothing: only an operator loosens a policy or unfreezes an agent. Answers as get_policy.',
      inputSchema: {
        patch: z
          .record(z.string(), z.unknown())
          .describe(
            'e.g. {"transfers": {"daily_units": "5000000"}, "approval_above_units": "2000000"}; fields: transfers {per_tx_units, daily_units, monthly_units, daily_count, allow, deny}, x402 {payees, daily_units, daily_count, unknown_payee}, approval_above_units, frozen',
          ),
      },
      outputSchema: policyResponseSchema.shape,
    },
    ({ patch }, { signal }) => run(signal, (client) => client.updatePolicy(patch as PolicyPatch), true),
  );
  return server;
}
