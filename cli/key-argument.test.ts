import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ValidationFailed } from "../client/index.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { runTool } from "../testing/run-tool.ts";

// `agent-wallet transfer … --key "$KEY"` with the variable unset, as a retry script runs it. The
// bin in its own process; a loopback server stands for the gateway and counts what reaches it.

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
const TOKEN = `agt_${"ab".repeat(16)}_${"cd".repeat(32)}`;
const TO = "0x1111111111111111111111111111111111111111";

describe("agent-wallet with a --key the gateway does not take", () => {
  // Mutation: without checkKeyArgument, each reaches the loopback gateway (which answers 400 as the
  // gateway does) and `paths` holds their requests.
  it("is ValidationFailed (exit 6) naming the key's rule, nothing sent", async () => {
    const paths: string[] = [];
    const gateway = await startLoopbackServer(async (request, response) => {
      paths.push(request.url ?? "");
      response.writeHead(400, { "content-type": "application/json" });
      response.end(
        '{"error":{"code":"validation_failed","message":"idempotency_key must not be empty","request_id":"r"}}',
      );
    });
    try {
      for (const [args, rule] of [
        [
          ["transfer", "--to", TO, "--amount", "1", "--key", ""],
          /must not be empty \(an empty --key "\$KEY" is usually a KEY that is not set\)/,
        ],
        [["faucet", "--key", ""], /must not be empty/],
        [["pay", `${gateway.url}/paid`, "--key", ""], /must not be empty/],
        [["transfer", "--to", TO, "--amount", "1", "--key", "two words"], /printable ASCII without spaces$/m],
        [["faucet", "--key", "k".repeat(129)], /at most 128 characters/],
      ] as const) {
        const run = await runTool(BIN, [...args, "--json"], {
          env: { AGENT_BASE_URL: `${gateway.url}/77`, AGENT_TOKEN: TOKEN },
          cleanEnv: true,
          timeoutMs: 60_000,
        });
        expect(run.code, `${JSON.stringify(args)}: ${run.stderr}`).toBe(ValidationFailed.exitCode);
        const { error } = JSON.parse(run.stdout) as { error: { code: string; message: string } };
        expect(error.code).toBe("validation_failed");
        expect(error.message).toMatch(/^--key: /);
        expect(error.message).toMatch(rule);
      }
      expect(paths).toEqual([]);
    } finally {
      await gateway.close();
    }
  }, 120_000);
});
