import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { HOST_TOKEN, spawnBareServer } from "./testing/stdio-host.ts";

// `npm run mcp` as an MCP host starts it, sent a tool call whose argument is over the 10 MB the MCP
// SDK's stdio transport reads. No gateway need listen: the call never reaches a tool.

describe("npm run mcp sent a message over the transport's limit", () => {
  // Mutation: without the server's close handler it ends with exit 0 and an empty stderr, its
  // tools gone without a word in the host's log.
  it("says why on stderr and exits 1, the token in no line", async () => {
    const server = spawnBareServer("http://127.0.0.1:9/77", "pipe");
    const { child } = server;
    // The server stops reading: the rest of what the test writes meets a closed pipe.
    child.stdin.on("error", () => {});
    const killer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    try {
      const lines = createInterface({ input: child.stdout! });
      const answered = new Promise<string>((resolve) => lines.once("line", resolve));
      server.initialize();
      expect(await answered).toContain('"id":1');
      server.send({
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "update_policy", arguments: { patch: { note: "y".repeat(11 * 1024 * 1024) } } },
      });
      const [code, signal] = await server.exited;
      expect({ code, signal }, server.stderr()).toEqual({ code: 1, signal: null });
      expect(server.stderr()).toBe(
        "agent-wallet mcp: the host sent a message over the 10 MB the MCP SDK's stdio transport reads (a tool argument that large); the server reads no more requests and exits 1: restart it\n",
      );
      expect(server.stderr()).not.toContain(HOST_TOKEN);
    } finally {
      clearTimeout(killer);
      child.kill("SIGKILL");
    }
  }, 60_000);
});
