/**
 * `npm run bench:cli` (docs/performance.md, "The agent CLI's start"): how long `agent-wallet` takes
 * from start to exit, `--help` and a real command (`balance`), median of several runs, beside the
 * way it started before (tsx compiling the TypeScript at every start), in one run on one machine.
 * Goal: the median of each command under 0.5 s.
 *
 * `balance` asks the service at AGENT_BASE_URL with AGENT_TOKEN when both are set (a running
 * `npm start`); otherwise a stub on loopback answers it, so the figure is the CLI's own time.
 * BENCH_RUNS sets the number of runs of each (default 9).
 */
import { execFileSync, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { cpus, loadavg } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startStealMeter } from "../testing/measure/cpu-steal.ts";
import { figureBeside } from "../testing/measure/goal-figure.ts";
import { median } from "../testing/measure/stats.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const RUNS = Number(process.env.BENCH_RUNS ?? 9);
const GOAL_SECONDS = 0.5;

/** The bin, as an agent runs it. */
const BIN = [path.join(ROOT, "cli/agent-wallet.mjs")];
/**
 * How the bin started before the bundle: tsx's loader registered, then the TypeScript imported.
 * Written beside the bundle (git ignores cli/dist/), so that it resolves tsx and the sources alike.
 */
const BEFORE_FILE = path.join(ROOT, "cli/dist/agent-wallet-through-tsx.mjs");
const BEFORE = [BEFORE_FILE];

const BALANCE = {
  address: "0x1111111111111111111111111111111111111111",
  balance: "100000000",
  decimals: 6,
  symbol: "USDC",
  balance_wei: "100000000000000000000",
  block_number: "1",
};

function startStub(): Promise<Server> {
  const server = createServer((request, response) => {
    const known = request.url === "/77/agent/v1/balance";
    response.writeHead(known ? 200 : 404, { "content-type": "application/json" });
    response.end(
      JSON.stringify(known ? BALANCE : { error: { code: "not_found", message: "", request_id: "" } }),
    );
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** Seconds from spawn to exit of one run; throws when it exits other than 0. */
function timeOnce(nodeArgs: string[], args: string[], env: Record<string, string>): Promise<number> {
  const started = performance.now();
  const child = spawn(process.execPath, [...nodeArgs, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => {
      if (code === 0) resolve((performance.now() - started) / 1000);
      else reject(new Error(`agent-wallet ${args.join(" ")} exited ${code}: ${stderr}`));
    });
  });
}

async function main(): Promise<void> {
  // The bundle as `npm install` builds it, current with this checkout.
  execFileSync(process.execPath, [path.join(ROOT, "cli/build.mjs")], { stdio: "inherit" });
  writeFileSync(
    BEFORE_FILE,
    'import { register } from "tsx/esm/api";\nregister();\nawait import("../main.ts");\n',
  );
  const external = process.env.AGENT_BASE_URL && process.env.AGENT_TOKEN;
  const stub = external ? undefined : await startStub();
  const address = stub?.address();
  const env: Record<string, string> = external
    ? { AGENT_BASE_URL: process.env.AGENT_BASE_URL!, AGENT_TOKEN: process.env.AGENT_TOKEN! }
    : {
        AGENT_BASE_URL: `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/77`,
        AGENT_TOKEN: `agt_${"0".repeat(32)}_${"0".repeat(64)}`,
      };
  const steal = await startStealMeter();
  const load = loadavg()[0]!;
  console.log(
    `${RUNS} runs of each, alternating; balance from ${external ? env.AGENT_BASE_URL : "a stub on loopback"}`,
  );
  const commands: Array<[string, string[]]> = [
    ["--help", ["--help"]],
    ["balance", ["balance"]],
  ];
  let met = true;
  const floor: number[] = [];
  try {
    for (const [name, args] of commands) {
      const now: number[] = [];
      const before: number[] = [];
      // Alternated, so the machine's other load falls on all alike. Node starting and exiting with
      // nothing to do is the floor no CLI goes under on this machine at this load.
      for (let run = 0; run < RUNS; run++) {
        now.push(await timeOnce(BIN, args, env));
        before.push(await timeOnce(BEFORE, args, env));
        floor.push(await timeOnce(["--eval", "0"], [], env));
      }
      const figure = median(now);
      const baseline = median(before);
      const ok = figure < GOAL_SECONDS;
      met &&= ok;
      console.log(
        `agent-wallet ${name.padEnd(7)} median ${figureBeside(figure, GOAL_SECONDS, 3)} s (min ${Math.min(...now).toFixed(3)}), ` +
          `baseline through tsx ${baseline.toFixed(3)} s (min ${Math.min(...before).toFixed(3)}): ` +
          `${(baseline / figure).toFixed(1)}× faster; goal < ${GOAL_SECONDS} s: ${ok ? "met" : "not met"}`,
      );
    }
  } finally {
    stub?.close();
  }
  console.log(
    `node alone (node --eval 0), the floor: median ${median(floor).toFixed(3)} s (min ${Math.min(...floor).toFixed(3)})`,
  );
  console.log(`load average (1 min) at the start: ${load.toFixed(2)} on ${cpus().length} cores`);
  console.log(await steal());
  console.log(`goal: ${met ? "met" : "not met"}`);
}

await main();
