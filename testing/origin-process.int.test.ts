import { readdir, readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { createTestDatabase } from "./database.ts";
import { spawnOrigin } from "./origin-process.ts";

// A test whose origin never got ready once left that origin running for the rest of the run:
// its database, its timers and its CPU, under every file after it.
describe("an origin process that does not get ready in time", () => {
  it("is stopped before spawnOrigin refuses", async () => {
    const db = await createTestDatabase();
    let left: number[] = [];
    try {
      // At warn the origin never logs where it listens, so readiness waits out its deadline while
      // the origin itself runs on.
      const started = spawnOrigin({ env: { DATABASE_URL: db.url, LOG_LEVEL: "warn" }, timeoutMs: 3_000 });
      await expect(started).rejects.toThrow("origin did not start in time");
      left = await processesWithEnv(`DATABASE_URL=${db.url}`);
      expect(left).toEqual([]);
    } finally {
      for (const pid of left) process.kill(pid, "SIGKILL");
      await db.drop();
    }
  });
});

/** The pids of the processes whose environment holds `variable` (NAME=value) exactly. */
async function processesWithEnv(variable: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const environ = await readFile(`/proc/${entry}/environ`, "utf8").catch(() => "");
    if (environ.split("\0").includes(variable)) pids.push(Number(entry));
  }
  return pids;
}
