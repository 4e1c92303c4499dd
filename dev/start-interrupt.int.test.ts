import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { runningPostmaster, startEmbeddedPostgres } from "../origin/db/embedded.ts";
import { sleep } from "../shared/sleep.ts";
import { freePort } from "../testing/free-port.ts";
import { launcherEnv } from "../testing/launcher.ts";
import { runTool } from "../testing/run-tool.ts";
import { stopPid } from "../testing/stop-pid.ts";

// The launcher stops what it started, last started first. A Ctrl-C or SIGTERM that reached it while
// its Postgres was still starting found no Postgres to stop yet and exited, and that Postgres then
// ran on with the data folder and its port: the next `npm start` met it in its way.

describe("npm start: a stop while its Postgres starts", () => {
  // Made before any test, so that a later test run alone (`-t`) still has a folder of its own, not
  // an empty START_DATA_DIR, which the launcher resolved to the repository's root and filled.
  let dataDir = "";
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "agents-start-interrupt-"));
    await chmod(dataDir, 0o755);
  });
  afterAll(async () => {
    const leftover = dataDir ? await runningPostmaster(path.join(dataDir, "pg")) : undefined;
    if (leftover) await stopPid(leftover.pid);
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("stops that Postgres too: none runs on the data folder once the launcher has exited", async () => {
    const pgPort = await freePort();
    // A folder used before: its cluster is there, so the launcher starts it (no initdb first).
    const earlier = await startEmbeddedPostgres({ dir: path.join(dataDir, "pg"), port: pgPort });
    await earlier.stop();
    const pidFile = path.join(dataDir, "pg", "postmaster.pid");
    let launcher: ChildProcess | undefined;
    let signalled = false;
    const run = runTool("dev/start.ts", [], {
      env: {
        START_DATA_DIR: dataDir,
        ORIGIN_PORT: String(await freePort()),
        DEVNET_PORT: String(await freePort()),
        EDGE_PORT: String(await freePort()),
        EMBEDDED_PG_PORT: String(pgPort),
        LOG_LEVEL: "warn",
      },
      timeoutMs: 120_000,
      onSpawn: (child) => {
        launcher = child;
      },
    });
    // The postmaster writes its pid file as it starts, before it accepts connections (and before
    // the launcher creates its database in it): the stop arrives in between.
    const deadline = Date.now() + 100_000;
    while (!existsSync(pidFile) && Date.now() < deadline && launcher?.exitCode === null) await sleep(5);
    if (existsSync(pidFile)) {
      launcher?.kill("SIGINT");
      signalled = true;
    }
    const { code, stdout } = await run;
    expect(signalled).toBe(true);
    // The stop came before Postgres was ready (a start that goes on prints its line after it).
    const ready = stdout.indexOf("[start] postgres   ready");
    expect(ready === -1 || ready > stdout.indexOf("[start] stopping…")).toBe(true);
    expect(code).toBe(0);
    expect(stdout).toContain("[start] postgres stopped");
    expect(await runningPostmaster(path.join(dataDir, "pg"))).toBeUndefined();
  }, 180_000);

  // A second Ctrl-C while the parts stopped (a stop that seems slow, an impatient hand) ended the
  // launcher at once with exit 0, in the middle of its stop: the Postgres it had started ran on
  // with the data folder and its port, and the next start refused to run beside it.
  it("a second Ctrl-C while it stops does not end it before its Postgres has stopped", async () => {
    let launcher: ChildProcess | undefined;
    let seen = "";
    let signals = 0;
    const { code, stdout } = await runTool("dev/start.ts", [], {
      env: await launcherEnv(dataDir),
      timeoutMs: 120_000,
      onSpawn: (child) => {
        launcher = child;
      },
      // The first Ctrl-C once Postgres runs, the second as soon as the stop has begun.
      onStdout: (text) => {
        seen += text;
        if (signals === 0 && seen.includes("[start] postgres   ready")) {
          signals = 1;
          launcher?.kill("SIGINT");
        }
        if (signals === 1 && seen.includes("[start] stopping…")) {
          signals = 2;
          launcher?.kill("SIGINT");
        }
      },
    });
    expect(signals).toBe(2);
    expect(await runningPostmaster(path.join(dataDir, "pg"))).toBeUndefined();
    expect(stdout).toContain("[start] postgres stopped");
    expect(code).toBe(0);
    expect(stdout).toContain("[start] still stopping");
  }, 180_000);

  // A launcher whose output nobody reads any more (`npm start | tee run.log` with tee gone, a
  // closed terminal) died of EPIPE at its next line, as the devnet once did: the parts stopped with
  // it, but its Postgres ran on, in the next start's way.
  it("goes on when its output is gone, and a Ctrl-C then still stops its Postgres", async () => {
    const launcher = spawn(process.execPath, programArgs("dev/start.ts"), {
      env: { ...process.env, ...(await launcherEnv(dataDir)) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => launcher.once("exit", (code) => resolve(code)));
    let seen = "";
    await new Promise<void>((resolve) => {
      launcher.stdout.on("data", (chunk: Buffer) => {
        seen += chunk.toString();
        if (seen.includes("[start] postgres   ready")) resolve();
      });
      void exited.then(() => resolve());
    });
    // Nobody reads its output from here on: its next lines meet a closed pipe.
    launcher.stdout.destroy();
    launcher.stderr.destroy();
    await sleep(3_000);
    const running = launcher.exitCode === null;
    launcher.kill("SIGINT");
    const code = await exited;
    expect(await runningPostmaster(path.join(dataDir, "pg"))).toBeUndefined();
    expect(running).toBe(true);
    expect(code).toBe(0);
  }, 180_000);
});
