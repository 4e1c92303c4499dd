/**
 * The MCP server of the agent wallet (issue 17): the gateway client's read and money calls as MCP
 * tools. No tool wraps x402 authorization (SPEC "x402 surfaces": the MCP adapter does not wrap the
 * authorize endpoint). The token is the server's, from its environment: it is never a tool
 * argument, and no tool result carries it (the gateway's answers never contain it, and errors are
 * reduced to their name, code and message).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { type GatewayClient, GatewayError, RateLimited } from "../client/index.ts";
import { RPC_READ_ALLOWLIST } from "../shared/constants.ts";
import { idempotencyKeySchema } from "../shared/gateway-schemas.ts";

export const MCP_TOOLS = ["network", "balance", "rpc", "faucet", "transfer", "action_status"] as const;

export function createWalletMcpServer(client: GatewayClient, version: string): McpServer {
  const server = new McpServer({ name: "agent-wallet", version });
  const run = async (call: () => Promise<unknown>): Promise<CallToolResult> => {
    try {
      return { content: [{ type: "text", text: JSON.stringify(await call(), null, 2) }] };
    } catch (error) {
      if (!(error instanceof GatewayError)) throw error;
      const described = {
        error: {
          name: error.name,
          code: error.code,
          message: error.message,
          ...(error instanceof RateLimited && error.retryAfter !== undefined
            ? { retry_after: error.retryAfter }
            : {}),
          ...(typeof error.body.reason === "string" ? { reason: error.body.reason } : {}),
        },
      };
      return { isError: true, content: [{ type: "text", text: JSON.stringify(described, null, 2) }] };
    }
  };
  const idempotencyKey = idempotencyKeySchema
    .optional()
    .describe(
      "Reuse the key of a call whose answer was lost; generated when absent (returned in the result).",
    );

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
      description: "A faucet payout to the agent's own wallet (needs the faucet capability).",
      inputSchema: { idempotency_key: idempotencyKey },
    },
    ({ idempotency_key }) => run(() => client.faucet({ idempotencyKey: idempotency_key })),
  );
  server.registerTool(
    "transfer",
    {
      description: "Transfer USDC from the agent's wallet. Poll action_status until confirmed.",
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
        "A faucet or transfer action's status (requested, signed, submitted, confirmed, failed, reverted).",
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
    ({ action_id, wait }) => run(() => (wait ? client.waitForAction(action_id) : client.action(action_id))),
  );
  return server;
}
