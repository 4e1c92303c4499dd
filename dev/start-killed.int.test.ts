import type { ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { readStateFile } from "../devnet/state/state-file.ts";
import { sleep } from "../shared/sleep.ts";
import { freePort } from "../testing/free-port.ts";
import { launcherEnv } from "../testing/launcher.ts";
import { runTool } from "../testing/run-tool.ts";
import { stopPid } from "../testing/stop-pid.ts";
import type { LauncherRecord } from "./leftovers.ts";
import { postmasterPid } from "./local-stack.ts";

// The parts `npm start` starts leave with their launcher when it dies (their IPC channel closes),
// the devnet saving its chain first. A launcher killed outright (kill -9, the OOM killer, a crash)
// also leaves their output pipes with no reader: the devnet's first line of its stop, written to
// its stderr, failed (EPIPE) and ended it before it saved, so every block of the run was lost
// while the database kept what was confirmed on them. Postgres and the edge's workerd cannot see
// their launcher die: the next start on the folder stops them (dev/leftovers.ts).

const READY = "[start] Ctrl-C stops everything";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("npm start killed outright", () => {
  let dataDir = "";
  afterAll(async () => {
    // Postgres and workerd, which cannot know their launcher died, stay when a start after it
    // did not stop them: stopped here.
    const leftover = dataDir ? await postmasterPid(path.join(dataDir, "pg")) : undefined;
    if (leftover) await stopPid(leftover);
    const record = dataDir
      ? await readFile(path.join(dataDir, "launcher.json"), "utf8").catch(() => undefined)
      : undefined;
    for (const pid of record ? (JSON.parse(record) as LauncherRecord).workerd : []) {
      if (alive(pid)) process.kill(pid, "SIGKILL");
    }
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
      // Once every part is up: the treasury's and the settler's funding are blocks on the devnet
      // by then, and the edge's workerd runs.
      onStdout: (text) => {
        if (text.includes(READY)) launcher?.kill("SIGKILL");
      },
    });
    expect(killed.stdout).toContain("[start] settler    gas funded");
    expect(killed.stdout).toContain(READY);

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

  it("the next start on the folder stops the Postgres and the workerd the killed one left, and comes up", async () => {
    // Mutation: local-stack.ts not calling stopLeftovers refuses this start ("the embedded
    // Postgres of … is running"), and the workerd stays.
    const record = JSON.parse(await readFile(path.join(dataDir, "launcher.json"), "utf8")) as LauncherRecord;
    expect(record.workerd.length).toBeGreaterThan(0);
    expect([record.postgres, ...record.workerd].map((pid) => alive(pid!))).toEqual(
      [record.postgres, ...record.workerd].map(() => true),
    );
    let launcher: ChildProcess | undefined;
    const again = await runTool("dev/start.ts", [], {
      env: { ...(await launcherEnv(dataDir)), DEVNET_PORT: String(await freePort()) },
      timeoutMs: 240_000,
      onSpawn: (child) => {
        launcher = child;
      },
      onStdout: (text) => {
        if (text.includes(READY)) launcher?.kill("SIGTERM");
      },
    });
    expect(again.stdout).toContain(
      `stopped the embedded Postgres (pid ${record.postgres}) that a start killed outright left running`,
    );
    for (const pid of record.workerd) {
      expect(again.stdout).toContain(`stopped the edge's workerd (pid ${pid})`);
      expect(alive(pid), `workerd ${pid}`).toBe(false);
    }
    expect(again.stdout).toContain(READY);
    expect(again.stdout).toContain("[start] postgres stopped");
    // A clean stop leaves nothing for the next start to stop.
    expect(existsSync(path.join(dataDir, "launcher.json"))).toBe(false);
  }, 300_000);
});
