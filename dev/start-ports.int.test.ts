import type { ChildProcess } from "node:child_process";
import { chmod, mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../testing/free-port.ts";
import { launcherEnv, runLauncherToExit } from "../testing/launcher.ts";
import { runTool } from "../testing/run-tool.ts";
import { stopPid } from "../testing/stop-pid.ts";
import { postmasterPid } from "./local-stack.ts";

// `npm start` printed "ready" and a token while another program held one of its ports (any 200 on
// /healthz, any JSON-RPC node on 8545 such as Anvil or Hardhat) and died right after. It now
// names the busy port and its variable before it starts anything.

let launcher: ChildProcess | undefined;

describe("npm start with a port another program holds", () => {
  let dataDir = "";
  /** Every data folder a test made, each removed at the end. */
  const folders: string[] = [];
  let squatter: Server | undefined;
  let leftover: number | undefined;
  afterAll(async () => {
    await new Promise((resolve) => (squatter ? squatter.close(resolve) : resolve(undefined)));
    if (leftover) await stopPid(leftover);
    for (const folder of folders) await rm(folder, { recursive: true, force: true });
  });

  it("refuses, exit 1, naming the port, its part and its variable with a command that starts the same stack (its folder, its other ports) on free ports, and starts nothing", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "agents-ports-"));
    folders.push(dataDir);
    await chmod(dataDir, 0o755);
    const devnetPort = await freePort();
    // Another chain's JSON-RPC node (chain 31337, as Anvil and Hardhat answer) on DEVNET_PORT.
    squatter = createServer((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.end('{"jsonrpc":"2.0","id":1,"result":"0x7a69"}');
    });
    await new Promise<void>((resolve) => squatter!.listen(devnetPort, "127.0.0.1", resolve));

    const env = { ...(await launcherEnv(dataDir)), DEVNET_PORT: String(devnetPort) };
    const { code, output } = await runLauncherToExit(env);
    expect(code).toBe(1);
    expect(output).toContain(
      `[start] failed: port ${devnetPort} (DEVNET_PORT, the devnet) is in use by another program. Stop that program, or choose other ports: `,
    );
    // The command, pasted as it is, starts the same stack: its data folder and its other ports as
    // given, the busy one replaced. It once named the busy port alone, and started another stack on
    // .data with the default ports when the others had been given on the command line.
    const suggested = output.match(/choose other ports: (.*) npm start\n/)?.[1];
    const replacement = suggested?.match(/DEVNET_PORT=(\d+)/)?.[1];
    expect(Number(replacement)).not.toBe(devnetPort);
    expect(suggested).toBe(
      `START_DATA_DIR=${dataDir} EMBEDDED_PG_PORT=${env.EMBEDDED_PG_PORT} DEVNET_PORT=${replacement} ORIGIN_PORT=${env.ORIGIN_PORT} EDGE_PORT=${env.EDGE_PORT}`,
    );
    expect(output).not.toContain("ready in");
    expect(output).not.toContain("AGENT_TOKEN=");
    // Nothing was started or made: not even the database.
    expect(await readdir(dataDir)).toEqual([]);
  }, 60_000);

  // A port variable that is no port (a word, 70000, 0) reached the first listen as it was and
  // ended the launcher with Node's "options.port should be >= 0 and < 65536. Received type number
  // (NaN)", naming no variable; a 0 for the origin or the devnet started it on a port the launcher
  // then waited a minute on.
  it("refuses a port variable that is no port, exit 1, naming the variable, and makes nothing", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "agents-bad-port-"));
    folders.push(dataDir);
    for (const [variable, value] of [
      ["ORIGIN_PORT", "abc"],
      ["DEVNET_PORT", "70000"],
      ["EMBEDDED_PG_PORT", "0"],
    ] as const) {
      const { code, output } = await runLauncherToExit({
        ...(await launcherEnv(dataDir)),
        [variable]: value,
      });
      expect(output).toContain(
        `[start] failed: ${variable} must be a port number from 1 to 65535, not "${value}"\n`,
      );
      expect(code).toBe(1);
      expect(await readdir(dataDir)).toEqual([]);
    }
  }, 120_000);

  // A launcher killed outright (kill -9, the OOM killer, a crash) cannot stop the Postgres it
  // started, which runs on with the data folder and its port. The next start called it "another
  // program" and advised other ports, where Postgres then refused the folder it still held.
  it("names the data folder's own Postgres an earlier, killed run left running, with the command that stops it", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "agents-leftover-pg-"));
    folders.push(dataDir);
    await chmod(dataDir, 0o755);
    const env = await launcherEnv(dataDir);
    const killed = await runTool("dev/start.ts", [], {
      env,
      timeoutMs: 120_000,
      onStdout: (text) => {
        if (text.includes("[start] postgres   ready")) launcher?.kill("SIGKILL");
      },
      onSpawn: (child) => {
        launcher = child;
      },
    });
    expect(killed.stdout).toContain("[start] postgres   ready");
    // Unrecorded, as by a launcher killed before it wrote down its Postgres (or a cluster an
    // operator tool started): one it recorded, the next start stops itself (start-killed.int.test.ts).
    await rm(path.join(dataDir, "launcher.json"), { force: true });
    leftover = await postmasterPid(path.join(dataDir, "pg"));
    expect(leftover).toBeGreaterThan(0);
    expect(() => process.kill(leftover!, 0)).not.toThrow();

    for (const port of [env.EMBEDDED_PG_PORT, String(await freePort())]) {
      const { code, output } = await runLauncherToExit({ ...env, EMBEDDED_PG_PORT: port });
      expect(code).toBe(1);
      expect(output).toContain(
        `[start] failed: the embedded Postgres of ${path.join(dataDir, "pg")} is running (pid ${leftover}): another npm start on this data folder or an operator tool is using it (let it finish, or stop it), or an earlier start killed outright left it (stop it with kill ${leftover}); then npm start again`,
      );
      expect(output).not.toContain("in use by another program");
    }
  }, 180_000);

  // After a reboot, the pid a crashed cluster's postmaster.pid names may be another process's.
  it("never names a process that took a stale postmaster.pid's pid: its port must answer too", async () => {
    const folder = await mkdtemp(path.join(tmpdir(), "agents-stale-pid-"));
    await chmod(folder, 0o755);
    try {
      const pgPort = await freePort();
      await mkdir(path.join(folder, "pg"));
      // This test's own process stands for the unrelated one; nothing listens on the port.
      await writeFile(
        path.join(folder, "pg", "postmaster.pid"),
        `${process.pid}\n${path.join(folder, "pg")}\n1700000000\n${pgPort}\n/tmp\n127.0.0.1\n`,
      );
      const { output } = await runLauncherToExit({
        START_DATA_DIR: folder,
        ORIGIN_PORT: String(await freePort()),
        DEVNET_PORT: String(await freePort()),
        EDGE_PORT: String(await freePort()),
        EMBEDDED_PG_PORT: String(pgPort),
        LOG_LEVEL: "warn",
      });
      expect(output).not.toContain(`kill ${process.pid}`);
      expect(output).not.toContain("is running (pid");
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  }, 120_000);

  // `START_DATA_DIR=` (set, empty) resolved to the working folder: the stack made its keys, its
  // Postgres cluster and its chain in the repository's root. Empty now means the default, as for
  // the ports; the data folder line comes first, and a busy port then stops the run before it makes
  // anything.
  it("reads an empty START_DATA_DIR as unset: its data folder is .data in the working folder, not the folder itself", async () => {
    const workingFolder = await mkdtemp(path.join(tmpdir(), "agents-empty-data-dir-"));
    folders.push(workingFolder);
    const busy = createServer();
    const edgePort = await freePort();
    await new Promise<void>((resolve) => busy.listen(edgePort, "127.0.0.1", resolve));
    try {
      const { code, stdout, stderr } = await runTool("dev/start.ts", [], {
        cwd: workingFolder,
        env: { ...(await launcherEnv("")), EDGE_PORT: String(edgePort) },
      });
      expect(`${stdout}${stderr}`).toContain(`[start] data folder ${path.join(workingFolder, ".data")}\n`);
      expect(code).toBe(1);
      expect(`${stdout}${stderr}`).toContain(
        `port ${edgePort} (EDGE_PORT, the edge) is in use by another program`,
      );
      expect((await readdir(workingFolder)).filter((name) => name !== ".data")).toEqual([]);
    } finally {
      await new Promise((resolve) => busy.close(resolve));
    }
  }, 60_000);
});
