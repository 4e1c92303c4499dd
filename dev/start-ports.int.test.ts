import { chmod, mkdtemp, readdir, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../testing/free-port.ts";
import { runLauncherToExit } from "../testing/launcher.ts";

// `npm start` printed "ready" and a token while another program held one of its ports (any 200 on
// /healthz, any JSON-RPC node on 8545 such as Anvil or Hardhat) and died right after. It now
// names the busy port and its variable before it starts anything.

describe("npm start with a port another program holds", () => {
  let dataDir = "";
  let squatter: Server | undefined;
  afterAll(async () => {
    await new Promise((resolve) => (squatter ? squatter.close(resolve) : resolve(undefined)));
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("refuses, exit 1, naming the port, its part and its variable with a command that avoids it, and starts nothing", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "agents-ports-"));
    await chmod(dataDir, 0o755);
    const devnetPort = await freePort();
    // Another chain's JSON-RPC node (chain 31337, as Anvil and Hardhat answer) on DEVNET_PORT.
    squatter = createServer((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.end('{"jsonrpc":"2.0","id":1,"result":"0x7a69"}');
    });
    await new Promise<void>((resolve) => squatter!.listen(devnetPort, "127.0.0.1", resolve));

    const { code, output } = await runLauncherToExit({
      START_DATA_DIR: dataDir,
      ORIGIN_PORT: String(await freePort()),
      DEVNET_PORT: String(devnetPort),
      EDGE_PORT: String(await freePort()),
      EMBEDDED_PG_PORT: String(await freePort()),
      LOG_LEVEL: "warn",
    });
    expect(code).toBe(1);
    expect(output).toContain(
      `[start] failed: port ${devnetPort} (DEVNET_PORT, the devnet) is in use by another program. Stop that program, or choose other ports: DEVNET_PORT=`,
    );
    expect(output).toMatch(/choose other ports: DEVNET_PORT=\d+ npm start/);
    expect(output).not.toContain("ready in");
    expect(output).not.toContain("AGENT_TOKEN=");
    // Nothing was started or made: not even the database.
    expect(await readdir(dataDir)).toEqual([]);
  }, 60_000);
});
