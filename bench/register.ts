/**
 * `npm run bench:register`: public registrations per second through the edge, beside
 * provisionIdentity called directly in the same run at the same concurrency.
 *
 * The stack is the local one's shape: the edge worker in Miniflare (behind the front that takes
 * the client's address from the connection), the origin as its own process (origin/main.ts, log
 * level info, its output read and dropped), an embedded Postgres, seeded free keys (the keys'
 * custody is not what this measures). CLIENTS concurrent clients, each on its own loopback address
 * and keep-alive connection, register until the day's network-wide quota refuses them. The quotas
 * stay on and exact: each round raises the network-wide quota by exactly ROUND registrations and
 * must end with exactly that many issued; the per-minute attempt limits are raised so that they
 * do not bind. Rounds alternate edge and direct, and each ratio is taken within its round (this
 * small VM's speed drifts); the CPU time stolen by the hypervisor is printed beside the figures.
 * Loopback only, bounded by count. Then, unless BENCH_FLOOD=0, the flood of registrations once the
 * minute's attempt limit is used (bench/flood-phases.ts), with its goal.
 */
import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, readFile, rm } from "node:fs/promises";
import { Agent, request } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { startEdge } from "../dev/edge.ts";
import { httpOk, startChild, waitUntilReady } from "../ops/lib/supervisor.ts";
import { connectDatabase, queryRows } from "../origin/db/client.ts";
import { startEmbeddedPostgres } from "../origin/db/embedded.ts";
import { migrateDatabase } from "../origin/db/migrate.ts";
import { provisionIdentity } from "../origin/keypool/provision.ts";
import { changeRegistrationSettings } from "../origin/registration/settings.ts";
import { HEADER_REGISTRATION } from "../shared/constants.ts";
import { freePort } from "../testing/free-port.ts";
import { startStealMeter } from "../testing/measure/cpu-steal.ts";
import { figureBeside } from "../testing/measure/goal-figure.ts";
import { median, quantile } from "../testing/measure/stats.ts";
import { seedFreeKeys } from "../testing/seed.ts";
import { runFloods } from "./flood-phases.ts";

const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 32);
/**
 * The network-wide attempts a minute the service admits by default
 * (docs/api.md#registration-quotas-and-counters).
 */
const NETWORK_ATTEMPTS_PER_MINUTE = 120;
const ROUND = Number(process.env.BENCH_ROUND ?? 400);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/**
 * Registrations per path before the measured rounds, at full concurrency. The edge path runs far
 * more JavaScript (the front, workerd, the origin) than a direct call, and V8 is still compiling it
 * for the first thousand or so requests: after a warm-up of 20 the rounds measured the JIT as much
 * as the path (CPU per registration over 3 rounds: origin 1.28 ms, this process 0.93 ms; after
 * 800: 0.96 ms and 0.58 ms). perf showed a third of the origin's CPU in V8's compilers.
 */
const WARM_UP = Number(process.env.BENCH_WARM_UP ?? 2 * ROUND);
const RESERVE = 10;

const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

type Figures = { count: number; ms: number; latencies: number[] };

/** One registration on a client's keep-alive agent: status and milliseconds. */
function registerOnce(url: string, agent: Agent): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", [HEADER_REGISTRATION]: "1" },
      },
      (res) => {
        res.resume();
        res.on("end", () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }));
      },
    );
    req.on("error", reject);
    req.end("{}");
  });
}

/** Every client registers until refused; the day's network-wide quota ends the round. */
async function edgeRound(url: string, agents: Agent[]): Promise<Figures> {
  const latencies: number[] = [];
  const refusals = new Map<number, number>();
  const started = performance.now();
  let lastSuccess = started;
  await Promise.all(
    agents.map(async (agent) => {
      for (;;) {
        const { status, ms } = await registerOnce(url, agent);
        if (status === 201) {
          latencies.push(ms);
          lastSuccess = performance.now();
          continue;
        }
        refusals.set(status, (refusals.get(status) ?? 0) + 1);
        if (status === 429 || status === 503) return;
        throw new Error(`registration answered ${status}`);
      }
    }),
  );
  return { count: latencies.length, ms: lastSuccess - started, latencies };
}

/** The same number of identities, provisioned directly by as many concurrent callers. */
async function directRound(db: Parameters<typeof provisionIdentity>[0], count: number): Promise<Figures> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next++ < count) {
        const t = performance.now();
        const result = await provisionIdentity(db, {
          capabilities: ["read", "transfer"],
          origin: "operator",
        });
        if (!result.ok) throw new Error(result.error.code);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { count, ms: performance.now() - started, latencies };
}

/** CPU seconds (user + system) of each process, from /proc, with each one's parent and name. */
async function processTable(): Promise<Map<number, { ppid: number; comm: string; seconds: number }>> {
  const table = new Map<number, { ppid: number; comm: string; seconds: number }>();
  const { readdir } = await import("node:fs/promises");
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, "utf8");
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const fields = stat.slice(close + 2).split(" ");
      // After the name: state, ppid, … utime (14th field overall), stime (15th), in clock ticks.
      table.set(Number(entry), {
        ppid: Number(fields[1]),
        comm,
        seconds: (Number(fields[11]) + Number(fields[12])) / 100,
      });
    } catch {}
  }
  return table;
}

/** CPU seconds of the parts of the stack: this process (load, front, direct calls), the origin, workerd, Postgres. */
async function cpuByPart(originPid: number): Promise<Record<string, number>> {
  const table = await processTable();
  const treeOf = (root: number): number => {
    let total = 0;
    const stack = [root];
    while (stack.length > 0) {
      const pid = stack.pop()!;
      total += table.get(pid)?.seconds ?? 0;
      for (const [child, info] of table) if (info.ppid === pid) stack.push(child);
    }
    return total;
  };
  const children = [...table].filter(([, info]) => info.ppid === process.pid);
  const named = (name: string) =>
    children.filter(([, info]) => info.comm.includes(name)).reduce((sum, [pid]) => sum + treeOf(pid), 0);
  return {
    "bench process (load, edge front, direct calls)": table.get(process.pid)?.seconds ?? 0,
    origin: treeOf(originPid),
    workerd: named("workerd"),
    postgres: named("postgres"),
  };
}

async function cpuTicks(): Promise<{ steal: number; total: number; busy: number } | undefined> {
  try {
    const first = (await readFile("/proc/stat", "utf8")).split("\n")[0]!;
    const fields = first.trim().split(/\s+/).slice(1).map(Number);
    const total = fields.reduce((a, b) => a + b, 0);
    // idle and iowait are the 4th and 5th fields; steal is the 8th.
    return {
      steal: fields[7] ?? 0,
      total,
      busy: total - (fields[3] ?? 0) - (fields[4] ?? 0) - (fields[7] ?? 0),
    };
  } catch {
    return undefined;
  }
}

function line(name: string, f: Figures): string {
  const sorted = [...f.latencies].sort((a, b) => a - b);
  const rate = (f.count * 1000) / f.ms;
  return `${name.padEnd(40)} ${rate.toFixed(0).padStart(6)}/s   p50 ${quantile(sorted, 0.5).toFixed(1)} ms   p99 ${quantile(sorted, 0.99).toFixed(1)} ms   (${f.count} in ${f.ms.toFixed(0)} ms)`;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), "bench-register-"));
  await chmod(dir, 0o755);
  const postgres = await startEmbeddedPostgres({ dir: path.join(dir, "pg"), port: await freePort() });
  const database = connectDatabase({ url: postgres.url, maxConnections: 10 });
  await migrateDatabase(database.db);
  const db = database.db;
  await seedFreeKeys(db, (ROUND * ROUNDS + WARM_UP) * 2 + RESERVE + 50);

  const edgeSecret = randomBytes(32).toString("hex");
  const originPort = await freePort();
  const origin = startChild({
    name: "origin",
    entry: "origin/main.ts",
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: postgres.url,
      AGENT_GATEWAY_ENABLED: "true",
      AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
      AGENT_REGISTRATION_ALLOW_LOOPBACK: "true",
      AGENT_EDGE_SHARED_SECRET: edgeSecret,
      AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
      ORIGIN_PORT: String(originPort),
      LOG_LEVEL: "info",
      // e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to see where the origin spends its time.
      ...(process.env.BENCH_ORIGIN_NODE_OPTIONS
        ? { NODE_OPTIONS: process.env.BENCH_ORIGIN_NODE_OPTIONS }
        : {}),
    },
    onLine: () => {},
  });
  const edge = await startEdge({
    originUrl: `http://127.0.0.1:${originPort}`,
    edgeSharedSecret: edgeSecret,
    onLine: () => {},
  });
  const agents = Array.from(
    { length: CLIENTS },
    (_, i) => new Agent({ keepAlive: true, maxSockets: 1, localAddress: `127.0.0.${i + 1}` }),
  );
  try {
    await waitUntilReady(origin, () => httpOk(`http://127.0.0.1:${originPort}/77/healthz`));
    const url = `${edge.url}/77/agent/v1/register`;
    const settings = async (changes: Record<string, unknown>, reason: string) => {
      const result = await changeRegistrationSettings(db, { changes, reason, source: "cli" });
      if (!result.ok) throw new Error(JSON.stringify(result.error));
    };
    await settings(
      {
        paused: false,
        per_ip_daily: 100_000,
        network_daily: 0,
        total_ceiling: 100_000_000,
        key_reserve: RESERVE,
        attempts_per_ip_per_minute: 100_000,
        attempts_global_per_minute: 10_000_000,
      },
      "bench:register: quotas raised for the run",
    );
    say(
      `bench:register — ${ROUNDS} rounds of ${ROUND} registrations through the edge and ${ROUND} direct provisionings after ${WARM_UP} of each unmeasured, ${CLIENTS} concurrent clients (one loopback address and keep-alive connection each); origin pool of 10 connections, direct pool of 10; node ${process.version}`,
    );

    // Warm-up, unmeasured: the paths, the pools, workerd, and V8's compiled code of each.
    await settings({ network_daily: WARM_UP }, "bench:register: warm-up");
    const warmed = await edgeRound(url, agents);
    if (warmed.count !== WARM_UP)
      throw new Error(`warm-up: ${warmed.count} issued under a quota of ${WARM_UP}`);
    await directRound(db, WARM_UP);

    const ticksBefore = await cpuTicks();
    const edgeRounds: Figures[] = [];
    const directRounds: Figures[] = [];
    const edgeCpu: Record<string, number> = {};
    const directCpu: Record<string, number> = {};
    for (let round = 0; round < ROUNDS; round++) {
      await settings({ network_daily: WARM_UP + (round + 1) * ROUND }, `bench:register: round ${round + 1}`);
      const cpuBefore = await cpuByPart(origin.process.pid!);
      const machineBefore = await cpuTicks();
      const edgeFigures = await edgeRound(url, agents);
      const machineAfter = await cpuTicks();
      const cpuAfter = await cpuByPart(origin.process.pid!);
      if (machineBefore && machineAfter) {
        edgeCpu["whole machine"] =
          (edgeCpu["whole machine"] ?? 0) + (machineAfter.busy - machineBefore.busy) / 100;
      }
      for (const part of Object.keys(cpuAfter))
        edgeCpu[part] = (edgeCpu[part] ?? 0) + cpuAfter[part]! - cpuBefore[part]!;
      if (edgeFigures.count !== ROUND) {
        throw new Error(
          `round ${round + 1}: ${edgeFigures.count} issued under a quota of exactly ${ROUND} more`,
        );
      }
      edgeRounds.push(edgeFigures);
      const directBefore = await cpuByPart(origin.process.pid!);
      directRounds.push(await directRound(db, ROUND));
      const directAfter = await cpuByPart(origin.process.pid!);
      for (const part of Object.keys(directAfter)) {
        directCpu[part] = (directCpu[part] ?? 0) + directAfter[part]! - directBefore[part]!;
      }
    }
    const ticksAfter = await cpuTicks();

    const all = (rounds: Figures[]): Figures => ({
      count: rounds.reduce((n, f) => n + f.count, 0),
      ms: rounds.reduce((n, f) => n + f.ms, 0),
      latencies: rounds.flatMap((f) => f.latencies),
    });
    const edgeAll = all(edgeRounds);
    const directAll = all(directRounds);
    say(line("POST /register through the edge", edgeAll));
    say(line("baseline: provisionIdentity directly", directAll));
    const edgeCount = edgeAll.count;
    const { "whole machine": machine = 0, ...parts } = edgeCpu;
    const ours = Object.values(parts).reduce((a, b) => a + b, 0);
    say(
      `CPU per registration through the edge: ${Object.entries(parts)
        .map(([part, seconds]) => `${part} ${((seconds * 1000) / edgeCount).toFixed(2)} ms`)
        .join(
          ", ",
        )}; other processes on this shared machine used ${(machine - ours).toFixed(1)} CPU-s beside our ${ours.toFixed(1)} during the edge rounds`,
    );
    say(
      `CPU per direct provisioning: ${Object.entries(directCpu)
        .filter(([, seconds]) => seconds > 0.05)
        .map(([part, seconds]) => `${part} ${((seconds * 1000) / directAll.count).toFixed(2)} ms`)
        .join(", ")}`,
    );
    const ratios = edgeRounds.map((f, i) => f.count / f.ms / (directRounds[i]!.count / directRounds[i]!.ms));
    const ratio = median(ratios);
    say(`ratio per round: ${ratios.map((r) => `${r.toFixed(2)}×`).join(", ")}; median ${ratio.toFixed(2)}×`);
    if (ticksBefore && ticksAfter) {
      const stolen = (ticksAfter.steal - ticksBefore.steal) / (ticksAfter.total - ticksBefore.total);
      say(`CPU time taken by the hypervisor during the run (steal): ${(stolen * 100).toFixed(1)} %`);
    }

    // The quotas were exact: every count agrees with the rows.
    const day = new Date().toISOString().slice(0, 10);
    const [check] = await queryRows<
      Record<
        | "issued"
        | "public_identities"
        | "wallets"
        | "identities"
        | "assigned"
        | "free"
        | "network_today"
        | "groups"
        | "network_daily",
        number
      >
    >(
      db,
      sql`select
            (select count(*)::int from registration_issued) as issued,
            (select count(*)::int from agent_identities where origin = 'public') as public_identities,
            (select count(distinct assigned_wallet)::int from agent_identities) as wallets,
            (select count(*)::int from agent_identities) as identities,
            (select count(*)::int from key_pool where status = 'assigned') as assigned,
            (select count(*)::int from key_pool where status = 'free') as free,
            (select coalesce(sum(count), 0)::int from registration_admissions where ip_group = '*' and day = ${day}) as network_today,
            (select coalesce(sum(count), 0)::int from registration_admissions where ip_group <> '*') as groups,
            (select network_daily from registration_policy) as network_daily`,
    );
    const issuedExpected = WARM_UP + ROUNDS * ROUND;
    const exact =
      check!.issued === issuedExpected &&
      check!.public_identities === issuedExpected &&
      check!.network_today === check!.network_daily &&
      check!.groups === issuedExpected &&
      check!.wallets === check!.identities &&
      check!.assigned === check!.identities &&
      check!.free >= RESERVE;
    say(
      `quotas exact: ${exact ? "yes" : "NO"} (issued ${check!.issued} = the day's network-wide quota ${check!.network_daily}; ${check!.identities} identities on ${check!.wallets} distinct wallets and ${check!.assigned} assigned keys; ${check!.free} free keys ≥ reserve ${RESERVE})`,
    );
    const rate = (edgeAll.count * 1000) / edgeAll.ms;
    // Registration admits 120 attempts a minute network-wide
    // (docs/api.md#registration-quotas-and-counters), 2 a second: the goal is headroom over that,
    // not a race with a direct call. The former goals (200/s, 0.5× direct) were set for batchers
    // that shared round trips between concurrent registrations; they were removed for simplicity
    // (docs/performance.md, "Removed"), and the ratio is printed for comparison only.
    const floor = (10 * NETWORK_ATTEMPTS_PER_MINUTE) / 60;
    say(
      `goal ≥ ${floor}/s (10× the network-wide limit of ${NETWORK_ATTEMPTS_PER_MINUTE} attempts a minute): ${rate >= floor ? "met" : "not met"} (${figureBeside(rate, floor, 0)}/s; ${ratio.toFixed(2)}× direct)`,
    );
    if (!exact) process.exitCode = 1;
  } finally {
    for (const agent of agents) agent.destroy();
    await edge.stop();
    await origin.stop();
    await database.close();
    await postgres.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
// The flood (docs/performance.md, "Floods"): once the minute's attempts are used, what refusing
// the rest costs, on a stack of its own (the agent beside it needs the devnet). BENCH_FLOOD=0 skips it.
if (process.env.BENCH_FLOOD !== "0") {
  say("");
  say("bench:register — the flood once the minute's attempt limit is used");
  const steal = await startStealMeter();
  const floods = await runFloods(["register"], say);
  say("");
  say(await steal());
  for (const { via, met } of floods) say(`flood of registrations, ${via}: ${met ? "met" : "not met"}`);
}
