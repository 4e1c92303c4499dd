import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { REPO_ROOT } from "../testing/enclave-process.ts";

// `npm run mcp` as an MCP host starts it, whose reader of the server's stdout goes away first (a
// host that crashed or restarts, its stdin not closed yet). No gateway need listen: tools/list
// answers from the server alone.

const TOKEN = `agt_${"ab".repeat(8)}_${"cd".repeat(32)}`;

describe("npm run mcp whose host stops reading its stdout", () => {
  it("stops as at its stdin's end: exit 0 at its next answer, no EPIPE stack trace", async () => {
    const child = spawn(process.execPath, programArgs("mcp/main.ts"), {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH, AGENT_TOKEN: TOKEN, AGENT_BASE_URL: "http://127.0.0.1:9/77" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<number | string>((resolve) =>
      child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")),
    );
    const send = (message: unknown): void => {
      child.stdin.write(`${JSON.stringify(message)}\n`);
    };
    const lines = createInterface({ input: child.stdout });
    const initialized = new Promise<string>((resolve) => lines.once("line", resolve));
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "test", version: "1" } },
    });
    expect(await initialized).toContain('"id":1');
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    // The host's reader gone, its stdin still open: the answer to tools/list meets a closed pipe.
    lines.close();
    child.stdout.destroy();
    send({ jsonrpc: "2.0", id: 2, method: "tools/list" });
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    const code = await exited;
    clearTimeout(timer);
    expect(code, stderr).toBe(0);
    expect(stderr).not.toMatch(/EPIPE|Unhandled|\n\s+at /);
  }, 30_000);
});
