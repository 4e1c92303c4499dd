/**
 * The MCP server of the agent wallet (docs/agents.md, "The agent's tools"): the gateway client's read and
 * money calls as MCP tools. No tool wraps x402 authorization (the MCP adapter does not wrap the
 * authorize endpoint). The token is the server's, from its environment: it is never a tool
 * argument, and no tool result carries it (neither the gateway's answers nor its error objects
 * contain it). An error result is the service's whole error object with the class's name; a
 * faucet or transfer that ends failed or reverted is an error result, never a success.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { errorFromAction, type GatewayClient, GatewayError, RateLimited } from "../client/index.ts";
import { RPC_READ_ALLOWLIST } from "../shared/constants.ts";
import { idempotencyKeySchema } from "../shared/gateway-schemas.ts";

export const MCP_TOOLS = ["network", "balance", "rpc", "faucet", "transfer", "action_status"] as const;

/** What a retry of a money call does, as the client's error classes say it (client/errors.ts). */
const RETRY_RULE =
  "An error named SignerUnavailable or ServiceUnavailable (agent_signer_unavailable, chain_unavailable, service_unavailable, no answer): nothing was signed, or the answer was lost; call again with the same idempotency_key (it is in the error), which never pays twice. Any other error that names an action_id (limit_exceeded, insufficient_funds, funding_gate_closed, faucet_cooldown, reverted, …) is final for that key: the same key answers the same error; send a new request with a new key once the cause is gone.";

export function createWalletMcpServer(client: GatewayClient, version: string): McpServer {
  const server = new McpServer({ name: "agent-wallet", version });
  const run = async (call: () => Promise<unknown>): Promise<CallToolResult> => {
    try {
      return { content: [{ type: "text", text: JSON.stringify(await call(), null, 2) }] };
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
          ...(error instanceof RateLimited && error.retryAfter !== undefined
            ? { retry_after: error.retryAfter }
            : {}),
          ...(error.idempotencyKey === undefined ? {} : { idempotency_key: error.idempotencyKey }),
        },
      };
      return { isError: true, content: [{ type: "text", text: JSON.stringify(described, null, 2) }] };
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
    () => run(() => client.network()),
  );
  server.registerTool(
    "balance",
    {
      description: "The agent wallet's balance: `balance` in 6-decimal USDC units, `balance_wei` on chain.",
      inputSchema: {},
    },
    () => run(() => client.balance()),
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
    ({ method, params }) => run(() => client.rpc(method, params)),
  );
  server.registerTool(
    "faucet",
    {
      description: `A faucet payout to the agent's own wallet (needs the faucet capability). ${RETRY_RULE}`,
      inputSchema: { idempotency_key: idempotencyKey },
    },
    ({ idempotency_key }) => run(() => client.faucet({ idempotencyKey: idempotency_key })),
  );
  server.registerTool(
    "transfer",
    {
      description: `Transfer USDC from the agent's wallet; then action_status (wait) until confirmed. ${RETRY_RULE}`,
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
    ({ to, amount, idempotency_key }) =>
      run(() => client.transfer({ to, amount, idempotencyKey: idempotency_key })),
  );
  server.registerTool(
    "action_status",
    {
      description:
        "A faucet or transfer action's status (requested, signed, submitted, confirmed); an action that ended failed or reverted is an error result naming its code.",
      inputSchema: {
        action_id: z.string().uuid(),
        wait: z
          .boolean()
          .default(false)
          .describe(
            "wait (up to 60 s) until it ends: confirmed, failed or reverted (an x402 authorization at signed)",
          ),
      },
    },
    ({ action_id, wait }) =>
      run(async () => (wait ? client.waitForAction(action_id) : outcome(await client.action(action_id)))),
  );
  return server;
}
