import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ServiceUnavailable } from "../client/index.ts";
import type { ActionView } from "../shared/gateway-schemas.ts";
import { actionView } from "../testing/action-view.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { runTool } from "../testing/run-tool.ts";

// `agent-wallet` against a gateway that takes the connection and then stalls: the bin in its own
// process, as an agent's script runs it, and a loopback server that never answers, or answers its
// headers and never the rest. The gateway never stalls so on its own, so the server is a stand-in
// for the fault only (a proxy or a host that hangs).

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
const TOKEN = `agt_${"ab".repeat(8)}_${"cd".repeat(32)}`;
/** What a run may take before the test calls it hung (the bin starts in a second or more when the machine is busy). */
const HUNG_AFTER_MS = 45_000;

const actionOf = (status: ActionView["status"]) => actionView({ action_id: "a1", status, amount: "2500000" });

describe("agent-wallet against a gateway that stalls", () => {
  const run = (base: string, args: string[], env: Record<string, string> = {}) =>
    runTool(BIN, args, {
      env: { AGENT_BASE_URL: `${base}/77`, AGENT_TOKEN: TOKEN, ...env },
      cleanEnv: true,
      timeoutMs: HUNG_AFTER_MS,
    });

  // Mutation: without the CLI's timeout each run waits until the test kills it (code -1).
  it("ends with exit 19 gateway_timeout, saying so, when no whole answer comes within --timeout or AGENT_TIMEOUT_SECONDS", async () => {
    const silent = await startLoopbackServer(async () => {
      // Takes the request, answers nothing.
    });
    const headersOnly = await startLoopbackServer(async (_request, response) => {
      response.writeHead(200, { "content-type": "application/json", "content-length": "500" });
      response.write('{"address":');
    });
    try {
      const json = await run(silent.url, ["balance", "--json", "--timeout", "1"]);
      expect(json.code, json.stderr).toBe(ServiceUnavailable.exitCode);
      const { error } = JSON.parse(json.stdout) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ name: "ServiceUnavailable", code: "gateway_timeout" });
      expect(error.message).toBe(
        `no answer from GET ${silent.url}/77/agent/v1/balance in time (no whole answer within 1 s; --timeout SECONDS or AGENT_TIMEOUT_SECONDS allows more)`,
      );

      const human = await run(headersOnly.url, ["balance"], { AGENT_TIMEOUT_SECONDS: "1.5" });
      expect(human.code, human.stderr).toBe(ServiceUnavailable.exitCode);
      // The headers came: the message says so, with their status.
      expect(human.stderr).toMatch(
        /^agent-wallet: ServiceUnavailable \[gateway_timeout\]: the answer of GET \S+\/agent\/v1\/balance did not come whole in time \(status 200; no whole answer within 1\.5 s;/,
      );
      expect(human.stderr).not.toMatch(/\bat .*\.(mjs|ts):\d+/);
      expect(`${json.stdout}${json.stderr}${human.stdout}${human.stderr}`).not.toContain(TOKEN);
    } finally {
      await silent.close();
      await headersOnly.close();
    }
  }, 120_000);

  // Mutation: a timeout that counts the wait a --wait read asks for cuts it: the read is repeated
  // until the wait's own minute ends, then exit 19.
  it("leaves a --wait read its wait: an action the service holds past --timeout until it is confirmed exits 0", async () => {
    const gateway = await startLoopbackServer(async (request, response) => {
      const held = new URL(request.url ?? "/", "http://x").searchParams.has("wait");
      if (held) await new Promise((resolve) => setTimeout(resolve, 2_500));
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify(actionOf(held ? "confirmed" : "submitted")));
    });
    try {
      const waited = await run(gateway.url, ["action", "a1", "--wait", "--timeout", "1", "--json"]);
      expect(waited.code, waited.stderr).toBe(0);
      expect(JSON.parse(waited.stdout)).toMatchObject({ action_id: "a1", status: "confirmed" });
    } finally {
      await gateway.close();
    }
  }, 120_000);

  it("refuses a --timeout that is not a number of seconds: usage, exit 2, nothing sent", async () => {
    let requests = 0;
    const gateway = await startLoopbackServer(async () => {
      requests++;
    });
    try {
      for (const timeout of ["0", "-1", "ten", "100000"]) {
        const refused = await run(gateway.url, ["balance", "--json", `--timeout=${timeout}`]);
        expect(refused.code, timeout).toBe(2);
        expect(JSON.parse(refused.stdout)).toMatchObject({ error: { code: "usage" } });
      }
      expect(requests).toBe(0);
    } finally {
      await gateway.close();
    }
  }, 120_000);
});
