import { execFileSync, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { runningPostmaster } from "../origin/db/embedded.ts";
import { sleep } from "../shared/sleep.ts";
import { launcherEnv } from "../testing/launcher.ts";
import { stopPid } from "../testing/stop-pid.ts";

// A stop (Ctrl-C, SIGTERM) that reached the launcher while its first start ran `enclave init` did
// not wait for it: the launcher stopped the devnet and Postgres and exited, the init finished on
// its own afterwards, and its record (enclave-init.json, what a recovery of the local stack starts
// from) was never written; the next start, finding an initialised enclave, never wrote it either.
// The init was also in the launcher's process group, where a terminal's Ctrl-C cut it between
// its files.

/** Pids and command lines of the processes whose command line mentions `text`. */
function processesMentioning(text: string): Array<{ pid: number; args: string }> {
  const out = execFileSync("ps", ["-eo", "pid=,args="], { encoding: "utf8" });
  return out
    .split("\n")
    .filter((line) => line.includes(text) && !line.includes("ps -eo"))
    .map((line) => {
      const [pid, ...args] = line.trim().split(/\s+/);
      return { pid: Number(pid), args: args.join(" ") };
    });
}

describe("npm start: a Ctrl-C while the first start initialises its enclave", () => {
  let dataDir = "";
  afterAll(async () => {
    if (!dataDir) return;
    for (const { pid } of processesMentioning(dataDir)) await stopPid(pid, "SIGKILL").catch(() => {});
    const leftover = await runningPostmaster(path.join(dataDir, "pg"));
    if (leftover) await stopPid(leftover.pid);
    await rm(dataDir, { recursive: true, force: true });
  });

  it("waits for the init, keeps its record, and leaves nothing running", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "agents-start-init-"));
    await chmod(dataDir, 0o755);
    const enclaveDir = path.join(dataDir, "enclave");
    const launcher = spawn(process.execPath, programArgs("dev/start.ts"), {
      env: { ...process.env, ...(await launcherEnv(dataDir)) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    launcher.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    launcher.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => launcher.once("exit", (code) => resolve(code)));

    // Ctrl-C as soon as `enclave init` runs on the data folder. The init is held (SIGSTOP) for
    // three seconds meanwhile, as a loaded machine would make it slow: the stop meets it running.
    let signalled = false;
    const deadline = Date.now() + 150_000;
    while (Date.now() < deadline && launcher.exitCode === null) {
      const init = processesMentioning(`--data-dir ${enclaveDir}`).find(({ args }) =>
        args.includes(" init "),
      );
      if (init) {
        process.kill(init.pid, "SIGSTOP");
        launcher.kill("SIGINT");
        signalled = true;
        setTimeout(() => {
          try {
            process.kill(init.pid, "SIGCONT");
          } catch {}
        }, 3_000);
        break;
      }
      await sleep(20);
    }
    const code = await exited;
    expect(signalled, output).toBe(true);
    // Nothing the launcher started outlives it, the init included.
    expect(processesMentioning(dataDir).map(({ args }) => args)).toEqual([]);
    expect(code, output).toBe(0);
    expect(output).toContain("[start] postgres stopped");
    // The enclave is initialised whole, and its record kept beside the keys.
    expect(existsSync(path.join(enclaveDir, "enclave.sealed"))).toBe(true);
    const record = JSON.parse(await readFile(path.join(dataDir, "enclave-init.json"), "utf8")) as {
      env_id?: string;
    };
    expect(record.env_id).toBe("local-dev");
  }, 200_000);
});
