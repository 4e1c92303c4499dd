import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { programArgs } from "../ops/lib/program-bundles.mjs";

/** Runs `npm run soak` with `args`; resolves with its exit code and everything it printed. */
function runSoak(args: string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [...programArgs("soak/main.ts"), ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, output })));
}

describe("npm run soak (smoke)", () => {
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
});
