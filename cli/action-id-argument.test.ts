import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { runTool } from "../testing/run-tool.ts";

// `agent-wallet action "$ACTION_ID"` with the variable unset or empty, as a script runs it. The bin
// in its own process; a loopback server stands for the gateway and counts what reaches it.

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
const TOKEN = `agt_${"ab".repeat(16)}_${"cd".repeat(32)}`;

describe("agent-wallet action with an empty action id", () => {
  // Mutation: without the check, `action ""` asks GET /agent/v1/actions/ and reports the gateway's
  // answer to that (here a 404, exit 9) instead of the command's usage.
  it("is a usage error (exit 2) naming what the command needs, nothing sent", async () => {
    const paths: string[] = [];
    const gateway = await startLoopbackServer(async (request, response) => {
      paths.push(request.url ?? "");
      response.writeHead(404, { "content-type": "application/json" });
      response.end('{"error":{"code":"not_found","message":"no such route","request_id":"r"}}');
    });
    try {
      for (const args of [
        ["action", ""],
        ["action", " "],
        ["action", "", "--wait"],
      ]) {
        const run = await runTool(BIN, args, {
          env: { AGENT_BASE_URL: `${gateway.url}/77`, AGENT_TOKEN: TOKEN },
          cleanEnv: true,
          timeoutMs: 60_000,
        });
        expect(run.code, `${JSON.stringify(args)}: ${run.stderr}`).toBe(2);
        expect(run.stderr).toContain("agent-wallet: action needs an action id");
        expect(run.stdout).toBe("");
      }
      expect(paths).toEqual([]);
    } finally {
      await gateway.close();
    }
  }, 120_000);
});
