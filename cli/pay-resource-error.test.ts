import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { freePort } from "../testing/free-port.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { runTool } from "../testing/run-tool.ts";
import { EXIT_RESOURCE_ERROR } from "./run.ts";

// `agent-wallet pay URL` when the resource answers with an error of its own, without asking for a
// payment: printed as any answer, and an exit code a script can branch on. The bin in its own
// process, against a loopback server answering as such a resource would; the gateway is never
// reached (its base URL is a port nothing listens on).

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
const TOKEN = `agt_${"ab".repeat(16)}_${"cd".repeat(32)}`;

describe("agent-wallet pay, the resource answering an error of its own", () => {
  // Mutation: without EXIT_RESOURCE_ERROR, each exits 0, as if the 404 or the 500 had been bought.
  it("prints the answer and exits 28; a 2xx is still 0", async () => {
    const resource = await startLoopbackServer(async (request, response) => {
      const status = Number(request.url?.slice(1));
      response.writeHead(status, { "content-type": "application/json" }).end(`{"status":${status}}`);
    });
    const gatewayPort = await freePort();
    const pay = (status: number, json: boolean) =>
      runTool(BIN, ["pay", `${resource.url}/${status}`, ...(json ? ["--json"] : [])], {
        env: { AGENT_BASE_URL: `http://127.0.0.1:${gatewayPort}/77`, AGENT_TOKEN: TOKEN },
        cleanEnv: true,
        timeoutMs: 60_000,
      });
    try {
      for (const status of [404, 500]) {
        const json = await pay(status, true);
        expect(json.code, json.stderr).toBe(EXIT_RESOURCE_ERROR);
        expect(JSON.parse(json.stdout)).toEqual({ status, settlement: null, body: { status } });
        const human = await pay(status, false);
        expect(human.code, human.stderr).toBe(EXIT_RESOURCE_ERROR);
        expect(human.stdout.split("\n")[0]).toBe(String(status));
      }
      const free = await pay(200, true);
      expect(free.code, free.stderr).toBe(0);
      expect(JSON.parse(free.stdout)).toEqual({ status: 200, settlement: null, body: { status: 200 } });
    } finally {
      await resource.close();
    }
  }, 120_000);
});
