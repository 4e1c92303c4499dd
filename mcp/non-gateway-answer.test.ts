import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { describe, expect, it } from "vitest";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { REPO_ROOT } from "../testing/enclave-process.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";

// `npm run mcp` whose AGENT_BASE_URL reaches some other service than a gateway, which answers a
// policy check 200 with JSON of another shape. The gateway always names rule and remaining (null
// when there are none), so a loopback server stands in for that other service.

const TOKEN = `agt_${"ab".repeat(16)}_${"cd".repeat(32)}`;

type ToolResult = { isError?: boolean; content: Array<{ type: string; text?: string }> };

describe("npm run mcp against a service that is not the gateway", () => {
  it("check_policy answered without rule and remaining is an UnexpectedAnswer error result", async () => {
    const other = await startLoopbackServer(async (request, response) => {
      for await (const _chunk of request) {
        // The body is read and passed over.
      }
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ decision: "allow" }));
    });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: programArgs("mcp/main.ts"),
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? "", AGENT_TOKEN: TOKEN, AGENT_BASE_URL: `${other.url}/77` },
      stderr: "pipe",
    });
    const client = new Client({ name: "mcp-test", version: "1.0.0" });
    try {
      await client.connect(transport);
      const result = (await client.callTool({
        name: "check_policy",
        arguments: { transfer: { to: `0x${"11".repeat(20)}`, amount: "1000" } },
      })) as ToolResult;
      const text = result.content.map((part) => part.text ?? "").join("");
      expect(result.isError, text).toBe(true);
      expect(text).toMatch(/"name": "UnexpectedAnswer"/);
    } finally {
      await client.close();
      await other.close();
    }
  }, 60_000);
});
