import { describe, expect, it } from "vitest";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import {
  connectStdioHost,
  resultText,
  SHORT_HOST_TIMEOUT_SECONDS,
  type ToolResult,
} from "./testing/stdio-host.ts";

// `npm run mcp` as an MCP host runs it (the official client, a request timeout of 20 s told to the
// server as AGENT_MCP_HOST_TIMEOUT_SECONDS: its calls end 10 s in), against
// a gateway in an outage that answers every transfer 503 with the longest Retry-After the client
// waits out (30 s). Getting the gateway to say so for a minute is not possible on demand, so a
// loopback server stands in for it.

describe("npm run mcp against a gateway answering 503 with Retry-After", () => {
  it("a transfer answers before the host's timeout: ServiceUnavailable with its key and retry_after, no pause past the call's deadline", async () => {
    const keys: string[] = [];
    const gateway = await startLoopbackServer(async (request, response) => {
      let body = "";
      for await (const chunk of request) body += chunk;
      keys.push((JSON.parse(body) as { idempotency_key: string }).idempotency_key);
      response.writeHead(503, { "content-type": "application/json", "retry-after": "30" });
      response.end(
        JSON.stringify({ error: { code: "service_unavailable", message: "the service is unavailable" } }),
      );
    });
    const host = await connectStdioHost(`${gateway.url}/77`, {
      hostTimeoutSeconds: SHORT_HOST_TIMEOUT_SECONDS,
    });
    const timeout = SHORT_HOST_TIMEOUT_SECONDS * 1000;
    try {
      const started = Date.now();
      // Without the deadline the client pauses 30 s, and the host's timeout ends the call first
      // with McpError -32001 "Request timed out": the agent never learns the key.
      const result = (await host.client.callTool(
        { name: "transfer", arguments: { to: `0x${"11".repeat(20)}`, amount: "1000" } },
        undefined,
        { timeout },
      )) as ToolResult;
      expect(Date.now() - started).toBeLessThan(timeout);
      const text = resultText(result);
      expect(result.isError, text).toBe(true);
      const { error } = JSON.parse(text) as { error: Record<string, unknown> };
      expect(error).toMatchObject({
        name: "ServiceUnavailable",
        status: 503,
        retry_after: 30,
        idempotency_key: expect.stringMatching(/^transfer-/),
      });
      expect(new Set(keys)).toEqual(new Set([error.idempotency_key]));
    } finally {
      await host.close();
      await gateway.close();
    }
  }, 120_000);
});
