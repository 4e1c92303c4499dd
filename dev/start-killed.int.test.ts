import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readStateFile } from "../devnet/state/state-file.ts";
import { sleep } from "../shared/sleep.ts";
import { freePort } from "../testing/free-port.ts";
import { launcherEnv } from "../testing/launcher.ts";
import { runTool } from "../testing/run-tool.ts";
import { stopPid } from "../testing/stop-pid.ts";
import { postmasterPid } from "./local-stack.ts";

// The parts `npm start` starts leave with their launcher when it dies (their IPC channel closes),
// the devnet saving its chain first. A launcher killed outright (kill -9, the OOM killer, a crash)
// also leaves their output pipes with no reader: the devnet's first line of its stop, written to
// its stderr, failed (EPIPE) and ended it before it saved, so every block of the run was lost
// while the database kept what was confirmed on them.

describe("npm start killed outright", () => {
  let dataDir = "";
  afterAll(async () => {
    // Postgres, which cannot know its launcher died, stays: stopped here.
    const leftover = dataDir ? await postmasterPid(path.join(dataDir, "pg")) : undefined;
    if (leftover) await stopPid(leftover);
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("the devnet still saves its chain, with the blocks mined before the kill", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "agents-start-killed-"));
    await chmod(dataDir, 0o755);
    const devnetPort = await freePort();
    let launcher: ChildProcess | undefined;
    const killed = await runTool("dev/start.ts", [], {
      env: { ...(await launcherEnv(dataDir)), DEVNET_PORT: String(devnetPort) },
      timeoutMs: 240_000,
      onSpawn: (child) => {
        launcher = child;
      },
      // The treasury's and the settler's funding are two blocks on the devnet.
      onStdout: (text) => {
        if (text.includes("[start] settler    gas funded")) launcher?.kill("SIGKILL");
      },
    });
    expect(killed.stdout).toContain("[start] settler    gas funded");

    // The devnet notices its launcher is gone, stops and saves.
    const stateFile = path.join(dataDir, "devnet-state.json");
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const answering = await fetch(`http://127.0.0.1:${devnetPort}`).then(
        () => true,
        () => false,
      );
      if (!answering && existsSync(stateFile)) break;
      await sleep(200);
    }
    expect(existsSync(stateFile)).toBe(true);
    const saved = await readStateFile(stateFile);
    const heights = [...(saved?.blocks ?? [])].map((block) => Number(BigInt(block.header.number)));
    expect(Math.max(...heights)).toBeGreaterThanOrEqual(2);
  }, 300_000);
});
