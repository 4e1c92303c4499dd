import { describe, expect, it } from "vitest";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import {
  balanceCallAtSilentGateway,
  connectStdioHost,
  HOST_TOKEN,
  resultText,
  SHORT_HOST_TIMEOUT_SECONDS,
  type ToolResult,
} from "./testing/stdio-host.ts";

// `npm run mcp` as an MCP host runs it (the official client, its default request timeout), against
// a gateway that takes each request and never answers. The gateway never stalls so on its own, so
// a loopback server stands in for the fault only (a proxy or a host before it that hangs).

// Its two tests wait out the server's deadline, each with its own gateway and server: side by side,
// the file takes one wait instead of two. Their host times out after 20 s, so the deadline is 10 s
// (mcp/host-timeout.ts: 50 s inside the official client's default 60, by the same margins).
const HOST_TIMEOUT_MS = SHORT_HOST_TIMEOUT_SECONDS * 1000;

describe.concurrent("npm run mcp against a gateway that stalls", () => {
  // Mutation: without the tool call's deadline the server waits on the gateway for ever; the host
  // gives up at its timeout with "Request timed out" (McpError -32001) and the agent never learns the
  // key under which the transfer may have gone out, so calling again pays again.
  it("a transfer answers within the host's timeout: a ServiceUnavailable gateway_timeout naming its key, every attempt sent with it", async () => {
    const keys: string[] = [];
    const gateway = await startLoopbackServer(async (request) => {
      let body = "";
      for await (const chunk of request) body += chunk;
      keys.push((JSON.parse(body) as { idempotency_key: string }).idempotency_key);
      // Takes the request, answers nothing.
    });
    const host = await connectStdioHost(`${gateway.url}/77`, {
      hostTimeoutSeconds: SHORT_HOST_TIMEOUT_SECONDS,
    });
    try {
      const started = Date.now();
      const result = (await host.client.callTool(
        { name: "transfer", arguments: { to: `0x${"11".repeat(20)}`, amount: "1000" } },
        undefined,
        { timeout: HOST_TIMEOUT_MS },
      )) as ToolResult;
      expect(Date.now() - started).toBeLessThan(HOST_TIMEOUT_MS);
      const text = resultText(result);
      expect(result.isError).toBe(true);
      const { error } = JSON.parse(text) as { error: Record<string, unknown> };
      expect(error).toMatchObject({
        name: "ServiceUnavailable",
        code: "gateway_timeout",
        idempotency_key: expect.stringMatching(/^transfer-/),
      });
      expect(error.message).toMatch(/no answer from POST .* in time \(no whole answer within 10 s/);
      expect(keys.length).toBeGreaterThan(0);
      expect(new Set(keys)).toEqual(new Set([error.idempotency_key]));
      expect(`${text}${host.stderr()}`).not.toContain(HOST_TOKEN);
    } finally {
      await host.close();
      await gateway.close();
    }
  }, 120_000);

  // Mutation: without the tool call's deadline the call to the stalled gateway never ends, and the
  // server with it: an orphan the host left behind, until the test kills it.
  it("a host that goes away while a call waits on it: the server exits 0 once the call's deadline passes", async () => {
    const { server, close } = await balanceCallAtSilentGateway();
    try {
      // The host is gone: its end of the server's stdin closes.
      server.child.stdin.end();
      const [code, signal] = await server.exited;
      expect({ code, signal }, server.stderr()).toEqual({ code: 0, signal: null });
      expect(server.stderr()).not.toContain(HOST_TOKEN);
    } finally {
      await close();
    }
  }, 120_000);
});
