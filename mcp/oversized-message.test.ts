import { spawn } from "node:child_process";
import { once } from "node:events";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { REPO_ROOT } from "../testing/enclave-process.ts";

// `npm run mcp` as an MCP host starts it, sent a tool call whose argument is over the 10 MB the MCP
// SDK's stdio transport reads. No gateway need listen: the call never reaches a tool.

const TOKEN = `agt_${"ab".repeat(16)}_${"cd".repeat(32)}`;

describe("npm run mcp sent a message over the transport's limit", () => {
  // Mutation: without the server's close handler it ends with exit 0 and an empty stderr, its
  // tools gone without a word in the host's log.
  it("says why on stderr and exits 1, the token in no line", async () => {
    const child = spawn(process.execPath, programArgs("mcp/main.ts"), {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH, AGENT_TOKEN: TOKEN, AGENT_BASE_URL: "http://127.0.0.1:9/77" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    // The server stops reading: the rest of what the test writes meets a closed pipe.
    child.stdin.on("error", () => {});
    const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
    const killer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    try {
      const send = (message: unknown): void => {
        child.stdin.write(`${JSON.stringify(message)}\n`);
      };
      const lines = createInterface({ input: child.stdout });
      const initialized = new Promise<string>((resolve) => lines.once("line", resolve));
      send({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "test", version: "1" },
        },
      });
      expect(await initialized).toContain('"id":1');
      send({ jsonrpc: "2.0", method: "notifications/initialized" });
      send({
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "update_policy", arguments: { patch: { note: "y".repeat(11 * 1024 * 1024) } } },
      });
      const [code, signal] = await exited;
      expect({ code, signal }, stderr).toEqual({ code: 1, signal: null });
      expect(stderr).toBe(
        "agent-wallet mcp: the host sent a message over the 10 MB the MCP SDK's stdio transport reads (a tool argument that large); the server reads no more requests and exits 1: restart it\n",
      );
      expect(stderr).not.toContain(TOKEN);
    } finally {
      clearTimeout(killer);
      child.kill("SIGKILL");
    }
  }, 60_000);
});
