import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../devnet/testing.ts";
import { NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../shared/constants.ts";
import type { ActionView } from "../shared/gateway-schemas.ts";
import type { StackAgent } from "../testing/money-stack.ts";
import { useMoneyStack } from "../testing/stack.ts";

// The MCP server (docs/agents.md, "The agent's tools") as an MCP host runs it: the official client starts
// `npm run mcp` on stdio, against the real stack.

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

type ToolResult = { isError?: boolean; content: Array<{ type: string; text?: string }> };

describe("MCP server (official client, stdio, real stack)", () => {
  const stack = useMoneyStack({}, { timeoutMs: 120_000 });
  let agent: StackAgent;
  let client: Client;
  const results: string[] = [];

  const call = async (
    name: string,
    args: Record<string, unknown> = {},
  ): Promise<{ isError: boolean; json: unknown }> => {
    const result = (await client.callTool({ name, arguments: args })) as ToolResult;
    const text = result.content.map((part) => part.text ?? "").join("");
    results.push(text);
    return { isError: result.isError === true, json: JSON.parse(text) };
  };

  beforeAll(async () => {
    agent = await stack.newAgent({ units: 5_000_000n });
    client = new Client({ name: "mcp-test", version: "1.0.0" });
    await client.connect(
      new StdioClientTransport({
        command: "npm",
        // --silent: npm's banner would go to stdout, which carries the protocol.
        args: ["run", "--silent", "mcp"],
        cwd: REPO_ROOT,
        env: {
          PATH: process.env.PATH ?? "",
          HOME: process.env.HOME ?? "",
          AGENT_TOKEN: agent.token,
          AGENT_BASE_URL: stack.origin.base,
        },
        stderr: "ignore",
      }),
    );
  }, 120_000);
  afterAll(async () => {
    await client?.close();
  });

  it("lists the wallet tools, none of them authorizes x402, and none takes a token", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(
      ["action_status", "balance", "faucet", "network", "rpc", "transfer"].sort(),
    );
    for (const tool of tools) {
      expect(tool.name).not.toMatch(/authori[sz]e|x402|pay/);
      expect(Object.keys(tool.inputSchema.properties ?? {})).not.toContain("token");
    }
    const rpc = tools.find((tool) => tool.name === "rpc")!;
    expect((rpc.inputSchema.properties as { method: { enum: string[] } }).method.enum).toContain(
      "eth_getBalance",
    );
  });

  it("reads the balance and makes a transfer on chain; the token is in no result", async () => {
    const balance = await call("balance");
    expect(balance).toEqual({
      isError: false,
      json: expect.objectContaining({ address: agent.wallet.toLowerCase(), balance: "5000000" }),
    });
    const to = newAccount().address;
    const sent = await call("transfer", { to, amount: "1250000" });
    expect(sent.isError).toBe(false);
    const action = sent.json as ActionView;
    const done = await call("action_status", { action_id: action.action_id, wait: true });
    expect(done.json).toMatchObject({ action_id: action.action_id, status: "confirmed", amount: "1250000" });
    expect(await publicClientFor(stack.devnet.url).getBalance({ address: to })).toBe(
      1_250_000n * WEI_PER_UNIT,
    );

    expect((await call("network")).json).toMatchObject({ agent: { agent_id: agent.agentId } });
    expect((await call("rpc", { method: "eth_chainId" })).json).toBe("0x4d");
    // Errors are results too, typed by the service's code.
    const over = await call("transfer", { to, amount: "99000000" });
    expect(over).toMatchObject({
      isError: true,
      json: { error: { name: "LimitExceeded", code: "limit_exceeded" } },
    });

    const [, secret] = agent.token.split(/_(?=[0-9a-f]{64}$)/);
    for (const text of results) {
      expect(text).not.toContain(agent.token);
      expect(text).not.toContain(secret);
    }
  });

  it("transfer with the signer down, then unable to sign: an error naming the key; the same call with it then moves the money once", async () => {
    const chain = publicClientFor(stack.devnet.url);
    const nonceBefore = await chain.getTransactionCount({ address: agent.wallet });
    const to = newAccount().address;
    const transfer = () => call("transfer", { to, amount: "1000", idempotency_key: "mcp-down-1" });
    await stack.enclave.stop();
    try {
      const down = await transfer();
      expect(down).toMatchObject({
        isError: true,
        json: {
          error: {
            name: "SignerUnavailable",
            code: "agent_signer_unavailable",
            message: expect.stringMatching(/nothing was signed: retry with the same idempotency_key/),
            status: 503,
            idempotency_key: "mcp-down-1",
          },
        },
      });
      // Another version of the enclave on the socket: it answers, and cannot sign for us.
      await stack.enclave.start({ profile: "bridge_operator" });
      expect(await transfer()).toMatchObject({
        isError: true,
        json: { error: { code: "agent_signer_unavailable", idempotency_key: "mcp-down-1" } },
      });
    } finally {
      await stack.enclave.start();
    }
    // The origin's enclave client reconnects after its backoff (at most 5 s).
    let sent = await transfer();
    for (let i = 0; i < 5 && sent.isError; i++) sent = await transfer();
    expect(sent.isError, JSON.stringify(sent.json)).toBe(false);
    const action = sent.json as ActionView;
    const done = await call("action_status", { action_id: action.action_id, wait: true });
    expect(done).toMatchObject({ isError: false, json: { status: "confirmed" } });
    expect(await chain.getBalance({ address: to })).toBe(1_000n * WEI_PER_UNIT);
    expect(await chain.getTransactionCount({ address: agent.wallet })).toBe(nonceBefore + 1);
  });

  it("a terminal failure is an error result with the service's fields, also on a repeat of the key", async () => {
    const overTo = newAccount().address;
    const over = () => call("transfer", { to: overTo, amount: "99000000", idempotency_key: "mcp-over-1" });
    const first = await over();
    const repeat = await over();
    expect(first).toMatchObject({
      isError: true,
      json: {
        error: {
          name: "LimitExceeded",
          code: "limit_exceeded",
          limit: "per_transaction",
          limit_units: "10000000",
          remaining_units: "10000000",
          action_id: expect.any(String),
          status: 403,
          idempotency_key: "mcp-over-1",
        },
      },
    });
    const refused = (first.json as { error: { action_id: string } }).error;
    expect(repeat).toMatchObject({
      isError: true,
      json: { error: { name: "LimitExceeded", code: "limit_exceeded", action_id: refused.action_id } },
    });

    // Mined and reverted: a plain transfer to the NativeTransferAuth precompile (no receive).
    const revert = () =>
      call("transfer", { to: NATIVE_TRANSFER_AUTH_ADDRESS, amount: "1000", idempotency_key: "mcp-revert-1" });
    const sent = await revert();
    expect(sent.isError).toBe(false);
    const action = sent.json as ActionView;
    const waited = await call("action_status", { action_id: action.action_id, wait: true });
    expect(waited).toMatchObject({
      isError: true,
      json: { error: { name: "ActionFailed", code: "reverted", action_id: action.action_id } },
    });
    expect(await call("action_status", { action_id: action.action_id })).toMatchObject({
      isError: true,
      json: { error: { name: "ActionFailed", code: "reverted" } },
    });
    expect(await revert()).toMatchObject({
      isError: true,
      json: { error: { name: "ActionFailed", code: "reverted", status: 422, action_id: action.action_id } },
    });
  });

  it("refuses a method off the allowlist at the tool's input schema", async () => {
    const refused = (await client.callTool({
      name: "rpc",
      arguments: { method: "eth_sendRawTransaction" },
    })) as ToolResult;
    expect(refused.isError).toBe(true);
    expect(refused.content[0]?.text).toMatch(/eth_getBalance|Invalid/);
  });
});
