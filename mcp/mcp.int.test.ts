import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { DEFAULT_REQUEST_TIMEOUT_MSEC } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../devnet/testing.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import type { ActionView } from "../shared/gateway-schemas.ts";
import { sleep } from "../shared/sleep.ts";
import { readBody, startLoopbackServer } from "../testing/loopback-server.ts";
import type { StackAgent } from "../testing/money-stack.ts";
import { deployRevertingContract } from "../testing/reverting-contract.ts";
import { useMoneyStack } from "../testing/stack.ts";

// The MCP server (docs/agents.md, "The agent's tools") as an MCP host runs it: the official client starts
// `npm run mcp` on stdio, against the real stack.

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** Adjacent concurrent blocks run at once; each block's tests run as it marks them. */
const BESIDE = { concurrent: true } as const;

/** The request timeout of the host of the test of `wait: true`, and of its server. */
const WAITER_HOST_TIMEOUT_SECONDS = 20;

type ToolResult = { isError?: boolean; content: Array<{ type: string; text?: string }> };

describe("MCP server (official client, stdio, real stack)", () => {
  // The test that stops the enclave retries until the origin has reconnected once it is back: its
  // signer client retries every 0.5 s at most here, not every 5 s (what the test checks is that the
  // same key then moves the money once, however soon that is).
  const stack = useMoneyStack(
    { signerTimings: { backoff: { initialMs: 50, maxMs: 500 } } },
    { timeoutMs: 120_000 },
  );
  let agent: StackAgent;
  let client: Client;
  const results: string[] = [];

  /** A tool's answer over the official client, its text kept for the token checks. */
  const callOn = async (
    on: Client,
    name: string,
    args: Record<string, unknown> = {},
    timeout = DEFAULT_REQUEST_TIMEOUT_MSEC,
  ): Promise<{ isError: boolean; json: unknown }> => {
    const result = (await on.callTool({ name, arguments: args }, undefined, { timeout })) as ToolResult;
    const text = result.content.map((part) => part.text ?? "").join("");
    results.push(text);
    return { isError: result.isError === true, json: JSON.parse(text) };
  };

  const call = (name: string, args: Record<string, unknown> = {}) => callOn(client, name, args);

  /** The official client over `npm run mcp` with this agent's token in the server's environment. */
  const connect = async (as: StackAgent, env: Record<string, string> = {}): Promise<Client> => {
    const connected = new Client({ name: "mcp-test", version: "1.0.0" });
    await connected.connect(
      new StdioClientTransport({
        command: "npm",
        // --silent: npm's banner would go to stdout, which carries the protocol.
        args: ["run", "--silent", "mcp"],
        cwd: REPO_ROOT,
        env: {
          PATH: process.env.PATH ?? "",
          HOME: process.env.HOME ?? "",
          AGENT_TOKEN: as.token,
          AGENT_BASE_URL: stack.origin.base,
          ...env,
        },
        stderr: "ignore",
      }),
    );
    return connected;
  };

  /**
   * What the test of `wait: true` waits on: a transfer held for approval, of its own agent over its
   * own server. Made before the tests, while the signer is up (making an agent needs it), so that
   * the 5 s wait, a read, runs beside the signer's stop and restart below.
   */
  let waiter: Client;
  let heldActionId: string;

  beforeAll(async () => {
    agent = await stack.newAgent({ units: 5_000_000n });
    client = await connect(agent);
    // Its host times out after 20 s (AGENT_MCP_HOST_TIMEOUT_SECONDS), where the official
    // client's default is 60: the wait fits inside either the same way (mcp/host-timeout.ts), and
    // the test waits 5 s rather than 45.
    waiter = await connect(await stack.newAgent({ units: 5_000_000n }), {
      AGENT_MCP_HOST_TIMEOUT_SECONDS: String(WAITER_HOST_TIMEOUT_SECONDS),
    });
    // A transfer held for approval: it stays held for longer than any wait.
    expect(
      (await callOn(waiter, "update_policy", { patch: { approval_above_units: "2000000" } })).isError,
    ).toBe(false);
    const held = await callOn(waiter, "transfer", { to: newAccount().address, amount: "3000000" });
    expect(held.json).toMatchObject({ status: "held" });
    heldActionId = (held.json as ActionView).action_id;
  }, 120_000);
  afterAll(async () => {
    await client?.close();
    await waiter?.close();
  });

  // The test of `wait: true` waits 5 s on an action that never ends; its block runs beside the
  // other tests' (vitest runs adjacent concurrent blocks at once), its transfer held before the
  // tests (above), so that nothing of it needs the signer the tests below stop and restart
  // (docs/performance.md, "The test suite").
  describe("a wait as long as the host allows", BESIDE, () => {
    it.sequential("action_status with wait true answers within its host's request timeout, even for an action that has not ended", async () => {
      const started = Date.now();
      // Mutation: a wait of the host's whole timeout loses the race: the client gives up first
      // with "Request timed out" (McpError -32001) and the agent never learns the status.
      const timeout = WAITER_HOST_TIMEOUT_SECONDS * 1000;
      const waited = await callOn(waiter, "action_status", { action_id: heldActionId, wait: true }, timeout);
      expect(Date.now() - started).toBeLessThan(timeout);
      expect(waited).toMatchObject({
        isError: true,
        json: { error: { name: "ServiceUnavailable", code: "wait_timeout" } },
      });
      expect((waited.json as { error: { message: string } }).error.message).toContain("still held");
    }, 150_000);
  });

  describe("the tools, one after another, then at once", BESIDE, () => {
    it.sequential("lists the wallet tools, none of them authorizes x402, and none takes a token", async () => {
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name).sort()).toEqual(
        [
          "action_status",
          "balance",
          "faucet",
          "network",
          "rpc",
          "transfer",
          "get_policy",
          "check_policy",
          "update_policy",
        ].sort(),
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

    it.sequential("reads the balance and makes a transfer on chain; the token is in no result", async () => {
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
      expect(done.json).toMatchObject({
        action_id: action.action_id,
        status: "confirmed",
        amount: "1250000",
      });
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

    it.sequential("transfer with the signer down, then unable to sign: an error naming the key; the same call with it then moves the money once", async () => {
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

    // From here the tests run at once (after the signer's stop and restart above, which no other
    // test may overlap): each has its own agent and server, or only reads and refuses with the
    // file's agent.
    it.concurrent("a terminal failure is an error result with the service's fields, also on a repeat of the key", async () => {
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

      // Mined and reverted: a transfer to a contract whose code is INVALID.
      const contract = await deployRevertingContract(stack.devnet.url);
      const revert = () =>
        call("transfer", { to: contract, amount: "1000", idempotency_key: "mcp-revert-1" });
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

    it.concurrent("the spending policy: get, tighten and check as structured results; a held transfer says held with rule and expires_at; a refusal names rule and remaining", async () => {
      const spender = await stack.newAgent({ units: 20_000_000n });
      const policyClient = await connect(spender);
      try {
        const tool = async (name: string, args: Record<string, unknown> = {}) => {
          const result = (await policyClient.callTool({ name, arguments: args })) as ToolResult & {
            structuredContent?: unknown;
          };
          const text = result.content.map((part) => part.text ?? "").join("");
          results.push(text);
          return {
            isError: result.isError === true,
            json: JSON.parse(text),
            structured: result.structuredContent,
          };
        };
        const none = await tool("get_policy");
        expect(none).toEqual({
          isError: false,
          json: { policy: null, version: null, node_frozen: false, budgets: [] },
          structured: { policy: null, version: null, node_frozen: false, budgets: [] },
        });
        const set = await tool("update_policy", {
          patch: { transfers: { per_tx_units: "5000000" }, approval_above_units: "2000000" },
        });
        expect(set.isError).toBe(false);
        expect(set.structured).toMatchObject({
          policy: { transfers: { per_tx_units: "5000000" }, approval_above_units: "2000000" },
          version: 1,
        });
        const loosen = await tool("update_policy", { patch: { approval_above_units: null } });
        expect(loosen).toMatchObject({
          isError: true,
          json: {
            error: { name: "PolicyLooseningRequiresOperator", code: "policy_loosening_requires_operator" },
          },
        });
        expect((await tool("get_policy")).structured).toMatchObject({ version: 1 });

        const to = newAccount().address;
        expect((await tool("check_policy", { transfer: { to, amount: "1000000" } })).structured).toEqual({
          decision: "allow",
          rule: null,
          remaining: null,
        });
        expect((await tool("check_policy", { transfer: { to, amount: "3000000" } })).structured).toEqual({
          decision: "hold",
          rule: "approval_above_units",
          remaining: null,
        });
        expect((await tool("check_policy", { transfer: { to, amount: "6000000" } })).structured).toEqual({
          decision: "deny",
          rule: "transfers.per_tx_units",
          remaining: "5000000",
        });
        expect(await tool("check_policy", {})).toMatchObject({
          isError: true,
          json: { error: { name: "ValidationFailed" } },
        });

        const held = await tool("transfer", { to, amount: "3000000", idempotency_key: "mcp-held-1" });
        expect(held).toMatchObject({
          isError: false,
          json: {
            status: "held",
            rule: "approval_above_units",
            expires_at: expect.any(String),
            tx_hash: null,
          },
        });
        expect(await tool("action_status", { action_id: (held.json as ActionView).action_id })).toMatchObject(
          {
            isError: false,
            json: { status: "held", rule: "approval_above_units" },
          },
        );
        const denied = await tool("transfer", { to, amount: "6000000" });
        expect(denied).toMatchObject({
          isError: true,
          json: {
            error: {
              name: "PolicyDenied",
              code: "policy_denied",
              rule: "transfers.per_tx_units",
              remaining: "5000000",
              status: 403,
            },
          },
        });
        const [, secret] = spender.token.split(/_(?=[0-9a-f]{64}$)/);
        for (const text of results) expect(text).not.toContain(secret);
      } finally {
        await policyClient.close();
      }
    });

    it.concurrent("action_status with wait in seconds answers as soon as the status changes, or after the wait unchanged", async () => {
      const spender = await stack.newAgent({ units: 5_000_000n });
      const own = await connect(spender);
      try {
        const tool = async (name: string, args: Record<string, unknown> = {}) => {
          const result = (await own.callTool({ name, arguments: args })) as ToolResult;
          const text = result.content.map((part) => part.text ?? "").join("");
          results.push(text);
          return { isError: result.isError === true, json: JSON.parse(text) };
        };
        // A transfer held for approval: nothing moves it until the test makes its hold expire.
        expect((await tool("update_policy", { patch: { approval_above_units: "2000000" } })).isError).toBe(
          false,
        );
        const held = await tool("transfer", { to: newAccount().address, amount: "3000000" });
        expect(held.json).toMatchObject({ status: "held" });
        const actionId = (held.json as ActionView).action_id;

        let started = Date.now();
        const unchanged = await tool("action_status", { action_id: actionId, wait: 1 });
        // Mutation: a tool that ignores wait (a plain read) answers at once and fails this.
        expect(Date.now() - started).toBeGreaterThanOrEqual(900);
        expect(unchanged).toMatchObject({ isError: false, json: { status: "held" } });

        started = Date.now();
        const waiting = tool("action_status", { action_id: actionId, wait: 20 });
        await sleep(1_500);
        // The hold's expiry brought forward (a hold lasts longer than a test): the tracker's real
        // expiry then ends it `expired`, which the waiting call answers with.
        await stack.db.handle.db.execute(
          sql`update agent_actions set hold_expires_at = now() - interval '1 second' where action_id = ${actionId}::uuid`,
        );
        await stack.origin.tracker!.tick();
        const changed = await waiting;
        const took = Date.now() - started;
        expect(changed).toMatchObject({
          isError: true,
          json: { error: { name: "PolicyDenied", action_status: "expired", action_id: actionId } },
        });
        expect(took).toBeGreaterThanOrEqual(1_400);
        expect(took).toBeLessThan(10_000);
        const { tools } = await own.listTools();
        const wait = tools.find((each) => each.name === "action_status")!.inputSchema.properties!.wait;
        expect(JSON.stringify(wait)).toContain('"maximum":30');
      } finally {
        await own.close();
      }
    });

    // Mutation: with the output schema of a policy as written today, the SDK refuses the server's
    // own answer: "Output validation error: Invalid structured content for tool get_policy", an
    // error that is not the gateway's, and the agent cannot read its policy at all.
    it.concurrent("get_policy answers a policy an earlier release stored with a control character in a resource prefix, as the gateway does", async () => {
      const holder = await stack.newAgent({ units: 1_000_000n });
      // What an earlier release stored for an agent's tightening to such a prefix (the route reads
      // the database's row; the enclave's sealed copy is not asked).
      const stored = {
        x402: {
          payees: [
            {
              pay_to: "0x2222222222222222222222222222222222222222",
              resource_prefix: "https://pay.example/\tpaid",
              per_payment_units: "10000",
            },
          ],
        },
      };
      await stack.db.handle.db.execute(
        sql`insert into agent_policies (agent_id, policy, version) values (${holder.agentId}::uuid, ${JSON.stringify(stored)}::jsonb, 1)`,
      );
      const own = await connect(holder);
      try {
        const result = (await own.callTool({ name: "get_policy", arguments: {} })) as ToolResult & {
          structuredContent?: unknown;
        };
        const text = result.content.map((part) => part.text ?? "").join("");
        expect(result.isError, text).not.toBe(true);
        expect(result.structuredContent).toMatchObject({ policy: stored, version: 1 });
        expect(JSON.parse(text)).toMatchObject({ policy: stored, version: 1 });
      } finally {
        await own.close();
      }
    });

    // Mutation: in the server's bundle the client's RpcError shares its name with viem's, and the
    // bundler renamed the class: the error came named "RpcError2", a class no doc names.
    it.concurrent("an rpc call the chain refuses is an error named RpcError, as the client's class is", async () => {
      const refused = await call("rpc", { method: "eth_getBalance", params: ["0x12", "latest"] });
      expect(refused).toMatchObject({ isError: true, json: { error: { name: "RpcError" } } });
    });

    // Mutation: without the JSON-RPC error's code the result says only `rpc_error`: a malformed
    // argument (-32602: the call as given is final) reads the same as a chain the gateway could not
    // reach (-32000: call again).
    it.concurrent("an rpc call the chain refuses names the JSON-RPC error's code, as the gateway answered it", async () => {
      const refused = await call("rpc", { method: "eth_getBalance", params: ["0x12", "latest"] });
      expect(refused).toMatchObject({
        isError: true,
        json: {
          error: {
            name: "RpcError",
            code: "rpc_error",
            rpc_code: -32602,
            message: expect.stringMatching(/^eth_getBalance: invalid argument 0/),
          },
        },
      });
    });

    // Mutation: without the check the call answers AgentAuthFailed, the gateway's 401 to a request
    // fetch sent on without the token: the agent is told its token is bad when its base URL is.
    it.concurrent("a base URL that redirects to the gateway on another origin: an UnexpectedAnswer naming that origin, not a bad token", async () => {
      const gatewayOrigin = new URL(stack.origin.base).origin;
      const redirector = await startLoopbackServer(async (request, response) => {
        await readBody(request);
        response.writeHead(308, { location: `${gatewayOrigin}${request.url}` });
        response.end();
      });
      const redirected = await connect(agent, { AGENT_BASE_URL: `${redirector.url}/77` });
      try {
        for (const [name, args] of [
          ["balance", {}],
          ["transfer", { to: newAccount().address, amount: "1000" }],
        ] as const) {
          const result = (await redirected.callTool({ name, arguments: args })) as ToolResult;
          const text = result.content.map((part) => part.text ?? "").join("");
          expect(result.isError, text).toBe(true);
          const { error } = JSON.parse(text) as { error: Record<string, unknown> };
          expect(error).toMatchObject({ name: "UnexpectedAnswer", status: 401 });
          expect(error.message).toContain(`redirected to ${gatewayOrigin}`);
          expect(text).not.toContain(agent.token);
        }
      } finally {
        await redirected.close();
        await redirector.close();
      }
    });

    it.concurrent("refuses a method off the allowlist at the tool's input schema", async () => {
      const refused = (await client.callTool({
        name: "rpc",
        arguments: { method: "eth_sendRawTransaction" },
      })) as ToolResult;
      expect(refused.isError).toBe(true);
      expect(refused.content[0]?.text).toMatch(/eth_getBalance|Invalid/);
    });
  });
});
