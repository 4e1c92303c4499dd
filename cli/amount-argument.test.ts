import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ValidationFailed } from "../client/index.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { runTool } from "../testing/run-tool.ts";

// `agent-wallet transfer --amount U` (and `policy check --amount U`) with an amount the gateway
// refuses (shared/gateway-schemas.ts unitsAmountSchema): the bin in its own process; a loopback
// server stands for the gateway and counts what reaches it.

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
const TOKEN = `agt_${"ab".repeat(16)}_${"cd".repeat(32)}`;
const TO = "0x1111111111111111111111111111111111111111";

describe("agent-wallet with an --amount the gateway does not take", () => {
  // Mutation: with the CLI's digits-only check (which took 0 and 007), those reach the loopback
  // gateway (which answers 400 as the gateway does) and `paths` holds their requests.
  it("is ValidationFailed (exit 6) naming --amount, nothing sent", async () => {
    const paths: string[] = [];
    const gateway = await startLoopbackServer(async (request, response) => {
      paths.push(request.url ?? "");
      response.writeHead(400, { "content-type": "application/json" });
      response.end(
        '{"error":{"code":"validation_failed","message":"amount must be a positive whole number of 6-decimal units, as a decimal string","request_id":"r"}}',
      );
    });
    try {
      for (const amount of ["0", "007", "1.5", "1e6", `1${"0".repeat(78)}`]) {
        for (const command of [["transfer"], ["policy", "check"]]) {
          const run = await runTool(BIN, [...command, "--to", TO, "--amount", amount, "--json"], {
            env: { AGENT_BASE_URL: `${gateway.url}/77`, AGENT_TOKEN: TOKEN },
            cleanEnv: true,
            timeoutMs: 60_000,
          });
          expect(run.code, `${command.join(" ")} --amount ${amount}: ${run.stdout}`).toBe(
            ValidationFailed.exitCode,
          );
          const { error } = JSON.parse(run.stdout) as { error: { code: string; message: string } };
          expect(error.code).toBe("validation_failed");
          expect(error.message).toMatch(/^--amount must be/);
        }
      }
      expect(paths).toEqual([]);
    } finally {
      await gateway.close();
    }
  }, 120_000);
});
