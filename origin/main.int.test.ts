import { execFileSync, spawn } from "node:child_process";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../scripts/test/free-port.ts";

function processesMentioning(text: string): string[] {
  return execFileSync("ps", ["-eo", "pid=,args="], { encoding: "utf8" })
    .split("\n")
    .filter((line) => line.includes(text) && !line.includes("ps -eo"));
}

describe("origin/main.ts as a process", () => {
  let dir = "";
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("starts its own embedded Postgres, serves, and on SIGTERM drains and stops everything with exit 0", async () => {
    dir = await mkdtemp(path.join(tmpdir(), "origin-main-"));
    await chmod(dir, 0o755);
    const port = await freePort();
    const { DATABASE_URL: _ownDatabase, ...inherited } = process.env;
    const origin = spawn(process.execPath, ["--import", "tsx", "origin/main.ts"], {
      env: {
        ...inherited,
        EMBEDDED_PG_DIR: path.join(dir, "pg"),
        EMBEDDED_PG_PORT: String(await freePort()),
        ORIGIN_PORT: String(port),
        LOG_LEVEL: "info",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    origin.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => origin.once("exit", (code) => resolve(code)));
    const deadline = Date.now() + 60_000;
    while (!output.includes("origin listening") && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(output).toContain('"owns_embedded":true');

    // A keep-alive connection left idle must not hold the shutdown open.
    const agent = new Agent({ keepAlive: true });
    const status = await new Promise<number>((resolve, reject) => {
      request(`http://127.0.0.1:${port}/77/healthz`, { agent }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      })
        .on("error", reject)
        .end();
    });
    expect(status).toBe(200);
    expect(processesMentioning(dir).length).toBeGreaterThan(0);

    const started = Date.now();
    origin.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(output).toContain('"msg":"stopped"');
    expect(processesMentioning(dir)).toEqual([]);
    agent.destroy();
  }, 90_000);

  it("refuses a bad configuration with one line per variable and exit 1", () => {
    let stderr = "";
    let code = 0;
    try {
      execFileSync(process.execPath, ["--import", "tsx", "origin/main.ts"], {
        env: { ...process.env, AGENT_ADMIN_API_TOKEN: "short", ORIGIN_PORT: "99999" },
        stdio: ["ignore", "ignore", "pipe"],
      });
    } catch (error) {
      const failure = error as { status: number; stderr: Buffer };
      code = failure.status;
      stderr = failure.stderr.toString();
    }
    expect(code).toBe(1);
    expect(stderr).toContain("AGENT_ADMIN_API_TOKEN: must be at least 32 bytes");
    expect(stderr).toContain("ORIGIN_PORT: must be at most 65535");
    expect(stderr).not.toContain("short");
  });
});
