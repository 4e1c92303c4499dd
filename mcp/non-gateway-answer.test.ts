import { describe, expect, it } from "vitest";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { connectStdioHost, resultText, type ToolResult } from "./testing/stdio-host.ts";

// `npm run mcp` whose AGENT_BASE_URL reaches some other service than a gateway, which answers a
// policy check 200 with JSON of another shape. The gateway always names rule and remaining (null
// when there are none), so a loopback server stands in for that other service.

describe("npm run mcp against a service that is not the gateway", () => {
  it("check_policy answered without rule and remaining is an UnexpectedAnswer error result", async () => {
    const other = await startLoopbackServer(async (request, response) => {
      for await (const _chunk of request) {
        // The body is read and passed over.
      }
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ decision: "allow" }));
    });
    const host = await connectStdioHost(`${other.url}/77`);
    try {
      const result = (await host.client.callTool({
        name: "check_policy",
        arguments: { transfer: { to: `0x${"11".repeat(20)}`, amount: "1000" } },
      })) as ToolResult;
      const text = resultText(result);
      expect(result.isError, text).toBe(true);
      expect(text).toMatch(/"name": "UnexpectedAnswer"/);
    } finally {
      await host.close();
      await other.close();
    }
  }, 60_000);
});
