import { spawn } from "node:child_process";
import { chmod, mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sleep } from "../shared/sleep.ts";
import { launcherEnv } from "../testing/launcher.ts";

/** The throwaway enclaves' folders (ops/lib/throwaway-enclave.ts) under `dir`. */
async function drillFolders(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((name) => name.startsWith("restore-drill-"));
}

// `npm start` drills the first key batches itself, in a throwaway enclave whose temporary folder
// holds its sealing key and every key it restored. A Ctrl-C while that drill runs must delete the
// folder as `npm run restore-drill` does: the launcher stops its own parts, and the throwaway is
// one of them.
describe("npm start: Ctrl-C during its restore drill", () => {
  let root = "";
  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("stops the throwaway enclave and deletes its folder, restored keys and all", async () => {
    root = await mkdtemp(path.join(tmpdir(), "agents-start-drill-"));
    const dataDir = path.join(root, "data");
    // The launcher's own temporary folder, so the throwaway's is found (and no other test's).
    const temp = path.join(root, "tmp");
    await mkdir(temp);
    await mkdir(dataDir);
    // Postgres runs as its own user and reads files in both (as /tmp itself allows).
    await chmod(root, 0o755);
    await chmod(temp, 0o1777);
    await chmod(dataDir, 0o755);
    const launcher = spawn(process.execPath, ["dev/start.mjs"], {
      env: {
        ...process.env,
        TMPDIR: temp,
        ...(await launcherEnv(dataDir)),
      },
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

    const deadline = Date.now() + 240_000;
    while ((await drillFolders(temp)).length === 0) {
      if (launcher.exitCode !== null || Date.now() > deadline) throw new Error(`no drill began:\n${output}`);
      await sleep(25);
    }
    expect(output).not.toContain("[start] drill ");
    launcher.kill("SIGINT");
    expect(await exited).toBe(0);
    expect(output).toContain("postgres stopped");
    expect(output).not.toContain("[start] failed");
    expect(await drillFolders(temp)).toEqual([]);
  }, 300_000);
});
