import { execFileSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { sleep } from "../shared/sleep.ts";
import { launcherEnv } from "../testing/launcher.ts";
import { runTool } from "../testing/run-tool.ts";

/** The pid of the launcher's child whose command line names `entry`'s program. */
function childOf(launcherPid: number, program: string): number | undefined {
  const out = execFileSync("ps", ["-eo", "pid=,ppid=,args="], { encoding: "utf8" });
  const row = out
    .split("\n")
    .map((line) => line.trim().split(/\s+/))
    .find(([, ppid, ...args]) => Number(ppid) === launcherPid && args.join(" ").includes(program));
  return row ? Number(row[0]) : undefined;
}

// The devnet saves its chain when it stops. One that crashed (or a machine that lost power) left
// the chain of its last clean stop, while Postgres kept every transaction confirmed since: the next
// `npm start` printed "ready", balances were back where they had been, and the origin's next
// transaction from a wallet waited forever for the nonces the chain had lost.

describe("npm start on a devnet chain behind its database", () => {
  let dataDir = "";
  afterAll(async () => {
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("refuses, naming both heights and how to start afresh, and starts no origin", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "agents-chain-behind-"));
    await chmod(dataDir, 0o755);
    const env = await launcherEnv(dataDir);
    // A first run: ready, then a transfer confirmed on the devnet and recorded in the database.
    let launcherPid = 0;
    let output = "";
    const first = runTool("dev/start.ts", [], {
      env,
      timeoutMs: 240_000,
      onSpawn: (child) => {
        launcherPid = child.pid ?? 0;
      },
      onStdout: (text) => {
        output += text;
      },
    });
    const deadline = Date.now() + 200_000;
    while (!output.includes("Ctrl-C stops everything") && Date.now() < deadline) await sleep(200);
    const token = /\[start\] token {6}(agt_\S+)/.exec(output)?.[1] ?? "";
    expect(token).not.toBe("");
    const base = `http://127.0.0.1:${env.ORIGIN_PORT}/77/agent/v1`;
    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    const sent = await fetch(`${base}/transfers`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        idempotency_key: `chain-behind-${randomUUID()}`,
        to: "0x1111111111111111111111111111111111111111",
        amount: "1000000",
      }),
    });
    const { action_id: actionId } = (await sent.json()) as { action_id: string };
    let status = "";
    while (status !== "confirmed" && Date.now() < deadline) {
      const action = await fetch(`${base}/actions/${actionId}`, { headers });
      status = ((await action.json()) as { status: string }).status;
      if (status !== "confirmed") await sleep(250);
    }
    expect(status).toBe("confirmed");
    // The devnet crashes: it saves nothing, and the stack stops.
    const devnet = childOf(launcherPid, "devnet/main");
    expect(devnet).toBeDefined();
    process.kill(devnet!, "SIGKILL");
    expect((await first).code).toBe(1);

    const again = await runTool("dev/start.ts", [], { env, timeoutMs: 120_000 });
    expect(again.code).toBe(1);
    expect(again.stdout).toMatch(
      /\[start\] failed: the devnet's chain ends at block 0 but the database holds transactions mined up to block \d+: the devnet stopped without saving its chain \(a crash, a kill -9, a power cut\)\. Start afresh: rm -rf /,
    );
    expect(again.stdout).not.toContain("[start] origin");
    expect(again.stdout).not.toContain("ready in");
  }, 360_000);
});
