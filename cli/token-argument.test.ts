import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { runTool } from "../testing/run-tool.ts";

// The token is read from AGENT_TOKEN only (docs/agents.md). An agent that puts it on the command line
// anyway (`agent-wallet "$AGENT_TOKEN" balance`, a token where an action id goes) must not find it
// in the CLI's output, which its logs keep, nor have it sent in a URL. The bin in its own process; a
// loopback server stands for the gateway and counts what reaches it.

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
/** Of a real token's shape (shared/agent-token.ts). */
const TOKEN = `agt_${"ab".repeat(16)}_${"cd".repeat(32)}`;
/** Another agent's token, of the same shape, which this environment does not hold. */
const OTHER_TOKEN = `agt_${"12".repeat(16)}_${"ef".repeat(32)}`;

describe("agent-wallet with a token among its arguments", () => {
  // Mutation: without the check, `agent-wallet TOKEN` prints "unknown command: agt_…", and
  // `action TOKEN` asks GET /agent/v1/actions/agt_… and prints that URL in its error.
  it("refuses it as a usage error (exit 2), sends nothing and never repeats it", async () => {
    const paths: string[] = [];
    const gateway = await startLoopbackServer(async (request, response) => {
      paths.push(request.url ?? "");
      response.writeHead(404, { "content-type": "application/json" });
      response.end('{"error":{"code":"not_found","message":"no such action","request_id":"r"}}');
    });
    try {
      for (const args of [
        [TOKEN],
        [TOKEN, "balance"],
        ["action", TOKEN],
        ["action", OTHER_TOKEN, "--json"],
        ["balance", `--key=${TOKEN}`],
      ]) {
        const run = await runTool(BIN, args, {
          env: { AGENT_BASE_URL: `${gateway.url}/77`, AGENT_TOKEN: TOKEN },
          cleanEnv: true,
          timeoutMs: 60_000,
        });
        const shown = args.map((arg) => (arg.includes("agt_") ? "<token>" : arg)).join(" ");
        expect(run.code, shown).toBe(2);
        expect(`${run.stdout}${run.stderr}`, shown).toMatch(/an argument holds an agent token/);
        expect(`${run.stdout}${run.stderr}`, shown).not.toContain(TOKEN);
        expect(`${run.stdout}${run.stderr}`, shown).not.toContain(OTHER_TOKEN);
      }
      expect(paths).toEqual([]);
    } finally {
      await gateway.close();
    }
  }, 120_000);
});
