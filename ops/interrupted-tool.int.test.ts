import { execFileSync, spawn } from "node:child_process";
import { chmod, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { sleep } from "../shared/sleep.ts";
import { freePort } from "../testing/free-port.ts";
import { programArgs } from "./lib/program-bundles.mjs";

// An operator tool stopped by a signal (a runbook's `timeout`, a `kill`) while it starts the
// embedded Postgres it needs, no stack running: the real tool process and the real cluster.

function processesMentioning(text: string): string[] {
  return execFileSync("ps", ["-eo", "pid=,args="], { encoding: "utf8" })
    .split("\n")
    .filter((line) => line.includes(text) && !line.includes("ps -eo"));
}

describe("an operator tool interrupted while it starts its embedded Postgres", () => {
  it.each(["SIGTERM", "SIGINT"] as const)(
    "%s: stops that Postgres, says so on stderr and exits 130",
    async (signal) => {
      const folder = await mkdtemp(path.join(tmpdir(), "tool-interrupted-"));
      await chmod(folder, 0o755);
      const pgDir = path.join(folder, "pg");
      try {
        const { DATABASE_URL: _ownDatabase, ...inherited } = process.env;
        const tool = spawn(process.execPath, [...programArgs("ops/agents.ts"), "list"], {
          env: { ...inherited, EMBEDDED_PG_DIR: pgDir, EMBEDDED_PG_PORT: String(await freePort()) },
          stdio: ["ignore", "pipe", "pipe"],
        });
        let stderr = "";
        tool.stderr.on("data", (chunk: Buffer) => {
          stderr += chunk.toString();
        });
        const exited = new Promise<number | null>((resolve) => tool.once("exit", (code) => resolve(code)));
        // The server is up; the tool has not read anything yet.
        const deadline = Date.now() + 60_000;
        while (
          !processesMentioning(pgDir).some((line) => line.includes(`postgres -D ${pgDir}`)) &&
          Date.now() < deadline
        ) {
          await sleep(20);
        }
        tool.kill(signal);
        const code = await exited;
        // Not left running, holding the data folder and its port for the next tool or stack.
        expect(processesMentioning(pgDir)).toEqual([]);
        expect(code).toBe(130);
        expect(stderr).toContain(`agents: interrupted (${signal})`);
      } finally {
        const pid = Number(
          (await readFile(path.join(pgDir, "postmaster.pid"), "utf8").catch(() => "")).split("\n")[0],
        );
        if (pid > 0 && processesMentioning(pgDir).some((line) => line.trim().startsWith(`${pid} `)))
          process.kill(pid, "SIGKILL");
        await rm(folder, { recursive: true, force: true });
      }
    },
    90_000,
  );
});
