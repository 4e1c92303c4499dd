/**
 * What a flood past a limit costs the service, and what it does to an agent beside it
 * (docs/performance.md, "Floods"). bench:flood runs every kind; bench:register runs the
 * registration one after its own rounds.
 *
 * The stack: an embedded Postgres, the devnet, the enclave process and the origin as its own
 * process (origin/main.ts, log level info, output kept only as a tail), x402 on; the edge (the
 * worker in Miniflare, reached on its own socket as Cloudflare's front reaches it, or with
 * BENCH_FLOOD_FRONT=1 through the local front as `npm start` serves it: bench/flood-driver.ts)
 * and the flood in a process of their own. For each kind, in one run, within the limits' minute:
 *   1. the limit is used, unmeasured (the minute's 120 registration attempts from 12 addresses;
 *      60 bad tokens from each flooding address; PAYMENTS_PER_PAYER verifies of one payer's
 *      payment from one address, which its address's budget for signed payments holds: the payer's
 *      window counts the one authorization once);
 *   2. quiet: one agent reads GET /balance every AGENT_INTERVAL_MS, straight at the origin (the
 *      edge in front of it is Cloudflare's in production; here it shares the two cores);
 *   3. the flood, FLOOD_RATE a second for FLOOD_S seconds (open loop, at most MAX_IN_FLIGHT out)
 *      through the edge, the agent reading on; quiet again;
 *   4. the same flood straight at the origin with the headers the edge adds (its secret, the
 *      client's address): the local edge passes far fewer than FLOOD_RATE on this machine, and
 *      in production it forwards at any rate (it has no limiter of its own); quiet again.
 * Printed per flood: what was sent and answered, how many answers the origin gave (its own counts,
 * GET {base}/metrics), the CPU the origin, Postgres and the edge side spent per refused request
 * beyond their rate in the quiet beside it (/proc, each tree), and the agent's p50 during the flood
 * against quiet, with the goal (≤ GOAL_RATIO) and `met` or `not met`.
 */
import { type ChildProcess, fork } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, readFile, rm } from "node:fs/promises";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { newAccount } from "../devnet/testing.ts";
import { cpuProfileArgs } from "../ops/lib/supervisor.ts";
import { connectDatabase } from "../origin/db/client.ts";
import { startEmbeddedPostgres } from "../origin/db/embedded.ts";
import { migrateDatabase } from "../origin/db/migrate.ts";
import { changeRegistrationSettings } from "../origin/registration/settings.ts";
import { sleep } from "../shared/sleep.ts";
import { freePort } from "../testing/free-port.ts";
import { figureBeside } from "../testing/measure/goal-figure.ts";
import { cpuDelta, treeCpuSeconds } from "../testing/measure/proc-cpu.ts";
import { quantile } from "../testing/measure/stats.ts";
import { startMoneyStack } from "../testing/money-stack.ts";
import { spawnOrigin } from "../testing/origin-process.ts";
import { parsePrometheusText } from "../testing/prometheus.ts";
import { envelope } from "../testing/x402-payer.ts";
import type {
  FloodLoad,
  FloodMessage,
  FloodPath,
  FloodReply,
  FloodRequest,
  FloodTally,
} from "./flood-driver.ts";

export type FloodKind = "register" | "bad_tokens" | "verify";
export const FLOOD_KINDS: readonly FloodKind[] = ["register", "bad_tokens", "verify"];

/**
 * Both, in this order, after one use of the limit: three quiet phases and two floods must end
 * within the limits' minute.
 */
const FLOOD_PATHS = (process.env.BENCH_FLOOD_PATHS ?? "edge,origin")
  .split(",")
  .map((via) => via.trim() as FloodPath);
/** BENCH_FLOOD_FRONT=1: through the local front and Miniflare's entry worker (FloodPath). */
const THROUGH_FRONT = process.env.BENCH_FLOOD_FRONT === "1";
const FLOOD_RATE = Number(process.env.BENCH_FLOOD_RATE ?? 2_000);
const FLOOD_S = Number(process.env.BENCH_FLOOD_SECONDS ?? 10);
const QUIET_S = Number(process.env.BENCH_QUIET_SECONDS ?? 10);
/** Requests the flood keeps out at once at most; the schedule's others are counted as skipped. */
const MAX_IN_FLIGHT = Number(process.env.BENCH_FLOOD_IN_FLIGHT ?? 256);
/** 8 reads a second: three kinds' phases stay under the agent's 600 requests a minute. */
const AGENT_INTERVAL_MS = 125;
const GOAL_RATIO = 1.5;
const EDGE_PATH = THROUGH_FRONT
  ? "through the local front and Miniflare's entry worker to the edge worker"
  : "through the edge worker's own socket, the client's address in CF-Connecting-IP";
/** The registration attempts a minute network-wide (docs/api.md#registration-quotas-and-counters). */
const NETWORK_ATTEMPTS_PER_MINUTE = 120;
const ATTEMPTS_PER_IP_PER_MINUTE = 10;
/** The pre-auth tier's failures per address a minute (docs/api.md#rate-limits). */
const FAILURES_PER_ADDRESS = 60;
/**
 * AGENT_X402_RATE_LIMIT_PER_MINUTE for the run (1,200 by default): payments per payer a minute. A
 * tenth, so using it takes seconds; what a refusal past it costs does not depend on the figure.
 */
const PAYMENTS_PER_PAYER = 120;
const BAD_TOKEN_ADDRESSES = 16;
const FLOOD_ADDRESSES = 200;
const KEY_RESERVE = 10;

const loopbackRange = (third: number, count: number): string[] =>
  Array.from({ length: count }, (_, i) => `127.0.${third}.${i + 1}`);

/** The flood's process: the edge and the load (bench/flood-driver.ts). */
type Driver = {
  child: ChildProcess;
  run(via: FloodPath, request: FloodRequest, load: FloodLoad): Promise<FloodTally>;
};

async function startDriver(originUrl: string, edgeSecret: string): Promise<Driver & { url: string }> {
  const entry = path.join(path.dirname(fileURLToPath(import.meta.url)), "flood-driver.ts");
  const child = fork(entry, [], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  const waiting = new Map<number, (tally: FloodTally) => void>();
  let ready: (url: string) => void = () => {};
  const started = new Promise<string>((resolve) => {
    ready = resolve;
  });
  child.on("message", (reply: FloodReply) => {
    if (reply.type === "ready") ready(reply.url);
    else waiting.get(reply.id)?.(reply.tally);
  });
  const failed = new Promise<never>((_, reject) =>
    child.on("exit", (code) => reject(new Error(`the flood driver exited with ${code}`))),
  );
  failed.catch(() => {});
  const tell = (message: FloodMessage): void => void child.send(message);
  tell({ type: "start", originUrl, edgeSecret, throughFront: THROUGH_FRONT });
  const url = await Promise.race([started, failed]);
  let id = 0;
  return {
    child,
    url,
    run(via, floodRequest, load) {
      const mine = ++id;
      const done = new Promise<FloodTally>((resolve) => waiting.set(mine, resolve));
      tell({ type: "run", id: mine, via, request: floodRequest, load });
      return Promise.race([done, failed]);
    },
  };
}

/** The agent's reads: one GET every AGENT_INTERVAL_MS until `until` resolves; latencies in ms. */
async function agentReads(url: string, token: string, until: Promise<unknown>): Promise<number[]> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  let done = false;
  void until.finally(() => {
    done = true;
  });
  while (!done) {
    const started = performance.now();
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(url, { agent, headers: { authorization: `Bearer ${token}` } }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      });
      req.on("error", reject);
      req.end();
    });
    const ms = performance.now() - started;
    if (status !== 200) throw new Error(`the agent's GET /balance answered ${status}`);
    latencies.push(ms);
    await sleep(Math.max(0, AGENT_INTERVAL_MS - ms));
  }
  agent.destroy();
  return latencies;
}

const p50 = (values: number[]): number =>
  quantile(
    [...values].sort((a, b) => a - b),
    0.5,
  );

/**
 * Requests the origin has answered other than 200 so far, on every route: during a flood the
 * agent's reads are its only 200s, and every other answer is the flood's.
 */
async function originRefusals(metricsUrl: string, adminToken: string): Promise<number> {
  const response = await fetch(metricsUrl, { headers: { authorization: `Bearer ${adminToken}` } });
  if (!response.ok) throw new Error(`GET /metrics answered ${response.status}`);
  const exposition = parsePrometheusText(await response.text());
  return exposition.samples
    .filter(
      (sample) =>
        sample.name === "origin_http_request_duration_seconds_count" && sample.labels.status !== "200",
    )
    .reduce((sum, sample) => sum + sample.value, 0);
}

type KindSetup = {
  title: string;
  /** Uses the limit, unmeasured; throws if the answers are not what a fresh limit gives. */
  useLimit(): Promise<void>;
  /** The flood's request, made once the limit is used. */
  flood(): FloodRequest;
};

export type FloodResult = { kind: FloodKind; via: FloodPath; met: boolean };

/** Runs the named kinds on one stack and prints each one's figures and goal line. */
export async function runFloods(
  kinds: readonly FloodKind[],
  say: (line: string) => void,
): Promise<FloodResult[]> {
  if (3 * QUIET_S + 2 * FLOOD_S > 55)
    throw new Error(
      "BENCH_QUIET_SECONDS × 3 + BENCH_FLOOD_SECONDS × 2 must stay within the limits' minute (55 s)",
    );
  const dir = await mkdtemp(path.join(tmpdir(), "bench-flood-"));
  await chmod(dir, 0o755);
  const postgres = await startEmbeddedPostgres({ dir: path.join(dir, "pg"), port: await freePort() });
  const handle = connectDatabase({ url: postgres.url, driver: "pg", maxConnections: 10 });
  await migrateDatabase(handle.db);
  const stack = await startMoneyStack({
    database: {
      url: postgres.url,
      name: "agents",
      handle,
      async drop() {
        await handle.close();
        await postgres.stop();
        await rm(dir, { recursive: true, force: true });
      },
    },
    inProcessOrigin: false,
    x402: { amountUnits: 1_000n, payTo: "enclave-payee" },
  });
  let origin: Awaited<ReturnType<typeof spawnOrigin>> | undefined;
  let driver: (Driver & { url: string }) | undefined;
  const results: FloodResult[] = [];
  try {
    say("setting up: agent, free keys, origin, edge…");
    // Before the origin starts: its key-pool refill would otherwise claim keys the factory hands out.
    const [agent] = await stack.newAgents(1, { units: 1_000n });
    if (kinds.includes("register")) await stack.addFreeKeys(NETWORK_ATTEMPTS_PER_MINUTE + KEY_RESERVE + 20);
    const edgeSecret = randomBytes(32).toString("hex");
    const adminToken = randomBytes(32).toString("hex");
    origin = await spawnOrigin({
      port: await freePort(),
      // BENCH_CPU_PROF=<dir> profiles it; BENCH_ORIGIN_NODE_ARGS gives it other node options instead.
      nodeArgs: process.env.BENCH_ORIGIN_NODE_ARGS?.split(" ").filter(Boolean) ?? cpuProfileArgs(),
      env: stack.processEnv({
        AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
        AGENT_REGISTRATION_ALLOW_LOOPBACK: "true",
        AGENT_EDGE_SHARED_SECRET: edgeSecret,
        AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
        AGENT_ADMIN_API_TOKEN: adminToken,
        AGENT_X402_RATE_LIMIT_PER_MINUTE: String(PAYMENTS_PER_PAYER),
        // The one payment sent again is counted once against its payer: its address's budget holds it.
        AGENT_X402_ADDRESS_PAYMENTS_PER_MINUTE: String(PAYMENTS_PER_PAYER),
        // Info, as deployed: each refusal writes its request's log line. "warn" shows what that costs.
        LOG_LEVEL: process.env.BENCH_ORIGIN_LOG_LEVEL ?? "info",
      }),
    });
    const result = await changeRegistrationSettings(handle.db, {
      changes: {
        paused: false,
        per_ip_daily: 100_000,
        network_daily: 100_000,
        total_ceiling: 100_000_000,
        key_reserve: KEY_RESERVE,
        attempts_per_ip_per_minute: ATTEMPTS_PER_IP_PER_MINUTE,
        attempts_global_per_minute: NETWORK_ATTEMPTS_PER_MINUTE,
      },
      reason: "bench:flood: open, the attempt limits at their defaults",
      source: "cli",
    });
    if (!result.ok) throw new Error(JSON.stringify(result.error));
    const originUrl = new URL(origin.base).origin;
    driver = await startDriver(originUrl, edgeSecret);
    // The limit is used straight at the origin, with the addresses the edge would name: through the
    // local edge, on this machine, using the payers' window alone took about its whole minute.
    const run = (floodRequest: FloodRequest, load: FloodLoad) => driver!.run("origin", floodRequest, load);
    const expectOnly = (what: string, tally: FloodTally, status: string, count: number): void => {
      if (tally.statuses[status] === count) return;
      // The origin's last refusals say which stage refused (its log lines carry no address or token).
      const refusals = origin!
        .output()
        .split("\n")
        .filter((line) => line.includes('"refused"'))
        .slice(-3);
      throw new Error(
        `${what}: expected ${count} × ${status}, got ${JSON.stringify(tally.statuses)}\n${refusals.join("\n")}`,
      );
    };

    // One payer's signed payment (unfunded: verify answers it invalid, 200), made when its kind
    // starts so it stays within its validity window.
    let verifyBody = "";
    const json = { "content-type": "application/json" };
    const setups: Record<FloodKind, KindSetup> = {
      register: {
        title: `POST /register from ${FLOOD_ADDRESSES} addresses once the minute's ${NETWORK_ATTEMPTS_PER_MINUTE} attempts are used`,
        async useLimit() {
          const addresses = loopbackRange(1, NETWORK_ATTEMPTS_PER_MINUTE / ATTEMPTS_PER_IP_PER_MINUTE);
          const request = registration(addresses);
          const tally = await run(request, {
            count: NETWORK_ATTEMPTS_PER_MINUTE,
            concurrency: addresses.length,
          });
          expectOnly("the minute's registrations", tally, "201", NETWORK_ATTEMPTS_PER_MINUTE);
        },
        flood: () => registration(loopbackRange(4, FLOOD_ADDRESSES)),
      },
      bad_tokens: {
        title: `GET /balance with a new bad token each time from ${BAD_TOKEN_ADDRESSES} addresses past their ${FAILURES_PER_ADDRESS} failures`,
        async useLimit() {
          const request = badTokens();
          const count = BAD_TOKEN_ADDRESSES * FAILURES_PER_ADDRESS;
          const tally = await run(request, { count, concurrency: BAD_TOKEN_ADDRESSES });
          expectOnly("the addresses' failures", tally, "401", count);
        },
        flood: badTokens,
      },
      verify: {
        title: `POST /x402/facilitator/verify, one payer's signed payment from one address past the address's ${PAYMENTS_PER_PAYER} a minute`,
        async useLimit() {
          const payment = await envelope(`${origin!.base}/x402/demo`, newAccount());
          verifyBody = JSON.stringify({
            x402Version: 2,
            paymentPayload: payment,
            paymentRequirements: payment.accepted,
          });
          const tally = await run(verifyFlood(), { count: PAYMENTS_PER_PAYER, concurrency: 16 });
          expectOnly("the payer's verifies", tally, "200", PAYMENTS_PER_PAYER);
        },
        flood: verifyFlood,
      },
    };
    function registration(addresses: string[]): FloodRequest {
      return {
        path: "/77/agent/v1/register",
        method: "POST",
        headers: { ...json, "x-svc-registration": "1" },
        body: "{}",
        addresses,
      };
    }
    function badTokens(): FloodRequest {
      return {
        path: "/77/agent/v1/balance",
        method: "GET",
        headers: {},
        addresses: loopbackRange(2, BAD_TOKEN_ADDRESSES),
        randomBearer: true,
      };
    }
    function verifyFlood(): FloodRequest {
      return {
        path: "/77/x402/facilitator/verify",
        method: "POST",
        headers: json,
        body: verifyBody,
        addresses: ["127.0.3.1"],
      };
    }

    const postmaster = Number(
      (await readFile(path.join(dir, "pg", "postmaster.pid"), "utf8")).split("\n")[0],
    );
    const roots = {
      origin: { pid: origin.child.pid, tree: true },
      postgres: { pid: postmaster, tree: true, reaped: true },
      [THROUGH_FRONT ? "edge side (front, workerd, the load)" : "edge side (workerd, the load)"]: {
        pid: driver.child.pid,
        tree: true,
      },
    };
    const balanceUrl = `${origin.base}/agent/v1/balance`;
    const metricsUrl = `${origin.base}/metrics`;
    // A warm path for the agent before any quiet figure.
    await agentReads(balanceUrl, agent!.token, sleep(2_000));

    const cpuNow = () => treeCpuSeconds(roots);
    /** A quiet phase: the agent's reads, and each tree's CPU a second meanwhile. */
    const quietPhase = async () => {
      const cpuBefore = await cpuNow();
      const started = performance.now();
      const reads = await agentReads(balanceUrl, agent!.token, sleep(QUIET_S * 1000));
      const seconds = (performance.now() - started) / 1000;
      const cpu = cpuDelta(cpuBefore, await cpuNow());
      const perSecond = Object.fromEntries(Object.entries(cpu).map(([part, used]) => [part, used / seconds]));
      return { reads, perSecond };
    };

    for (const kind of kinds) {
      const setup = setups[kind];
      say("");
      say(`flood: ${setup.title}, ${FLOOD_RATE}/s for ${FLOOD_S} s (at most ${MAX_IN_FLIGHT} in flight)`);
      await setup.useLimit();
      let quietBefore = await quietPhase();
      for (const via of FLOOD_PATHS) {
        const cpuBefore = await cpuNow();
        const refusedBefore = await originRefusals(metricsUrl, adminToken);
        const started = performance.now();
        const flooding = driver.run(via, setup.flood(), {
          rate: FLOOD_RATE,
          seconds: FLOOD_S,
          maxInFlight: MAX_IN_FLIGHT,
        });
        const during = await agentReads(balanceUrl, agent!.token, flooding);
        const tally = await flooding;
        const seconds = (performance.now() - started) / 1000;
        const cpu = cpuDelta(cpuBefore, await cpuNow());
        const reached = (await originRefusals(metricsUrl, adminToken)) - refusedBefore;
        const quietAfter = await quietPhase();

        const refused = tally.statuses["429"] ?? 0;
        const answered = Object.entries(tally.statuses)
          .map(([status, n]) => `${n} × ${status}`)
          .join(", ");
        say(`  ${via === "edge" ? EDGE_PATH : "straight at the origin, as an edge forwards it"}:`);
        say(
          `    sent ${tally.sent} in ${seconds.toFixed(1)} s (${(tally.sent / seconds).toFixed(0)}/s; ${tally.skipped} not sent with ${MAX_IN_FLIGHT} out, ${tally.errors} errors): ${answered}; the origin answered ${reached} of them`,
        );
        // The flood's own share: each tree's CPU less what it spends a second in the quiet beside.
        say(
          `    CPU per refused request, beyond the quiet rate: ${Object.entries(cpu)
            .map(([part, used]) => {
              const extra =
                used -
                (((quietBefore.perSecond[part] ?? 0) + (quietAfter.perSecond[part] ?? 0)) / 2) * seconds;
              return `${part} ${refused > 0 ? ((extra * 1e6) / refused).toFixed(0) : "–"} µs`;
            })
            .join(", ")}`,
        );
        const quiet = [...quietBefore.reads, ...quietAfter.reads];
        const ratio = p50(during) / p50(quiet);
        say(
          `    agent GET /balance p50: quiet before ${p50(quietBefore.reads).toFixed(2)} ms (${quietBefore.reads.length} reads), during ${p50(during).toFixed(2)} ms (${during.length}), quiet after ${p50(quietAfter.reads).toFixed(2)} ms (${quietAfter.reads.length})`,
        );
        const met = ratio <= GOAL_RATIO;
        say(
          `    goal: p50 during the flood ≤ ${GOAL_RATIO}× quiet (before and after together): ${met ? "met" : "not met"} (${figureBeside(ratio, GOAL_RATIO)}×)`,
        );
        results.push({ kind, via, met });
        quietBefore = quietAfter;
      }
    }
  } finally {
    if (driver) {
      const exited = new Promise((resolve) => driver!.child.once("exit", resolve));
      driver.child.send({ type: "stop" } satisfies FloodMessage);
      await Promise.race([exited, sleep(10_000)]);
      if (driver.child.exitCode === null) driver.child.kill("SIGKILL");
    }
    await origin?.stop();
    await stack.close();
  }
  return results;
}
