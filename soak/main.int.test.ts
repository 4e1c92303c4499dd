import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { programArgs } from "../ops/lib/program-bundles.mjs";

/**
 * Runs `npm run soak` with `args`; resolves with its exit code and everything it printed. In a
 * process group of its own, as a terminal runs it; `onOutput` is told everything printed so far.
 */
function runSoak(
  args: string[],
  onOutput?: (output: string, child: ChildProcess) => void,
): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [...programArgs("soak/main.ts"), ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  const take = (chunk: Buffer): void => {
    output += chunk.toString();
    onOutput?.(output, child);
  };
  child.stdout.on("data", take);
  child.stderr.on("data", take);
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, output })));
}

// The two runs side by side: each `npm run soak` starts a stack of its own (a fresh data folder, free
// ports, its own Postgres, devnet, enclave and origin), so neither sees the other's load, and every
// figure they print is only checked for its form or against their own stack.
describe("npm run soak (smoke)", { concurrent: true }, () => {
  // The stack's start-up (fresh Postgres, devnet, enclave, origin, one restore drill) is most of
  // this test's time; the load is the shortest that still runs the probes and a few payments.
  it("runs the whole stack under the mix for a few seconds and prints the table, the limits, money conserved and the goals", async () => {
    const { code, output } = await runSoak([
      "--seconds",
      "4",
      "--agents",
      "2",
      "--payers",
      "1",
      "--rate",
      "20",
    ]);
    expect(code, output).toBe(0);
    // Memory per process: every part of the stack measured at start, after warm-up and at the end.
    for (const part of ["origin", "enclave", "devnet", "edge (Miniflare workerd)", "postgres"]) {
      expect(output).toMatch(
        new RegExp(`\\n  ${part.replace(/[()]/g, "\\$&")} +\\d+ MiB +\\d+ MiB +\\d+ MiB +\\d\\.\\d{3}`),
      );
    }
    // Requests by route kind and status, with the probes' kinds (how many of the mix's own kinds a
    // few seconds reach depends on the machine's load).
    expect(output).toContain("Requests by route kind and status");
    expect(output).toMatch(/\n {2}network \(rate probe\) +\d+/);
    expect(output).toMatch(/\n {2}transfer \(limit probe\) +[.\d]/);
    expect(output).toMatch(/\n {2}all +\d+/);
    expect(output).toContain("Limits held (expected vs observed)");
    expect(output).toMatch(/transfer per-transaction limit +held\n/);
    // x402: the payer, the payee and the settler are in the money check, and no payment settled
    // twice (a 4 s run on a loaded machine may pay none, so the count is not asserted).
    expect(output).toMatch(/x402: every payment settled once +held/);
    for (const category of [
      "x402 payers (viem accounts) (1)",
      "x402 payee (demo payTo) (1)",
      "x402 settler (gas) (1)",
    ]) {
      expect(output).toContain(`\n  ${category} `);
    }
    // Money: balances plus fees equal the genesis allocation, to the wei.
    expect(output).toMatch(/\n {2}difference +0\n/);
    expect(output).toContain("goal: money conserved to the wei: met");
    expect(output).toMatch(/goal: zero 5xx \(and every request answered\): (met|not met \(\d+\))/);
    expect(output).toMatch(
      /goal: RSS of every process within \+15 % of its after-warm-up value: (met|not met)/,
    );
    // The stack was stopped.
    expect(output).toContain("[soak] stack  postgres stopped");
  }, 300_000);

  it("on Ctrl-C during the load ends it, prints the report over what ran, stops the stack, removes its data folder and exits 130", async () => {
    let signalled = false;
    let hung = false;
    const { code, output } = await runSoak(
      ["--seconds", "600", "--warm-up-seconds", "1", "--agents", "2", "--payers", "1", "--rate", "20"],
      (sofar, child) => {
        if (signalled || !/\[soak\] load {3}\d/.test(sofar)) return;
        signalled = true;
        // Ctrl-C in a terminal: SIGINT to the whole foreground process group, a few seconds in.
        setTimeout(() => {
          if (child.pid === undefined) return;
          process.kill(-child.pid, "SIGINT");
          // Ending the load, the report and the stack's stop take well under a minute.
          setTimeout(() => {
            if (child.exitCode !== null || child.signalCode !== null) return;
            hung = true;
            child.kill("SIGKILL");
          }, 90_000).unref();
        }, 5_000);
      },
    );
    expect(signalled, output).toBe(true);
    expect(hung, `the soak had not exited 90 s after Ctrl-C:\n${output}`).toBe(false);
    expect(code, output).toBe(130);
    expect(output).toMatch(/\[soak\] SIGINT: ending the load/);
    expect(output).toContain("Requests by route kind and status");
    expect(output).toMatch(/\n {2}all +\d+/);
    expect(output).toContain("Limits held (expected vs observed)");
    expect(output).toMatch(/\n {2}difference +0\n/);
    expect(output).toContain("goal: money conserved to the wei: met");
    expect(output).toMatch(/interrupted by SIGINT after \d+ s of load/);
    // The memory table's heading gives the seconds that ran, not the 600 asked for.
    const heading = /warm-up = first 1 s of load, then (\d+) s measured/.exec(output);
    expect(Number(heading?.[1]), output).toBeLessThan(600);
    expect(output).toContain("[soak] stack  postgres stopped");
    const dataDir = /\[soak\] stack {2}data folder (\S+)/.exec(output)?.[1];
    expect(dataDir, output).toBeDefined();
    expect(existsSync(dataDir!), `${dataDir} is left behind`).toBe(false);
  }, 400_000);
});
