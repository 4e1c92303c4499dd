/**
 * `npm run bench:devnet`: throughput of the devnet, in its own process (as npm start runs it),
 * loaded over loopback HTTP from this one.
 *
 * Transactions are signed before each phase starts, then sent over HTTP with
 * eth_sendRawTransaction, which returns once the transaction is mined, so a returned call is a
 * settled transaction. Each phase runs for BENCH_SECONDS (default 3) or until its signed
 * transactions run out, and is checked afterwards against the recipient's balance.
 *
 * Phases: plain native transfers and NativeTransferAuth settlements (transferWithAuthorization
 * submitted by relayers), each sequential and with CONCURRENCY senders in parallel; then
 * eth_blockNumber reads, the baseline for the gateway's /rpc benchmark. The settlement phases also
 * run on a second devnet started with maxTxsPerBlock 1 (one block per transaction, as before group
 * commit), the same-run baseline for group commit; at CONCURRENCY the two alternate for
 * BENCH_ROUNDS rounds (default 3) and the summary compares their medians.
 *
 * Columns beyond rate and latency: transactions per block; CPU ms per transaction of the devnet's
 * process (all its threads); and CPU ms per transaction of its main thread alone, whose saturation
 * caps the rate. The machine is shared: the run also prints the CPU steal (from /proc/stat) and
 * the load average.
 */
import { readFile } from "node:fs/promises";
import { Agent } from "node:http";
import { availableParallelism, loadavg } from "node:os";
import { type Hex, parseGwei } from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import {
  fund,
  newAccount,
  rpc,
  signTransferAuthorization,
  transferAuthorization,
  transferWithAuthorizationCalldata,
  usdc,
} from "../devnet/testing.ts";
import { type ManagedChild, profiledProgram, startChild } from "../ops/lib/supervisor.ts";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../shared/constants.ts";
import { postJson } from "../testing/kept-alive-rpc.ts";
import { figureBeside } from "../testing/measure/goal-figure.ts";
import { cpuMsOf, mainThreadCpuMs } from "../testing/measure/proc-cpu.ts";
import { median, quantile } from "../testing/measure/stats.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
/** Signed ahead per phase; comfortably more than the devnet mines in SECONDS on a laptop. */
const POOL = Number(process.env.BENCH_POOL ?? 1_500);
const FEES = { maxFeePerGas: parseGwei("3"), maxPriorityFeePerGas: parseGwei("1") };
/** Alternating rounds of the 16-concurrent settlement comparison. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** The pass mark of the grouped devnet: settlements per second at 16 concurrent. */
const SETTLEMENT_GOAL_PER_SECOND = 300;

type PhaseResult = {
  name: string;
  sent: number;
  seconds: number;
  latencies: number[];
  /** Blocks mined during the phase; undefined for reads. */
  blocks: number | undefined;
  /** CPU time of the whole process (devnet, its workers, the clients) during the phase, in ms. */
  cpuMs: number;
  /** CPU time of the main thread alone during the phase, in ms (Linux; NaN elsewhere). */
  mainMs: number;
  verified: string;
};
type Send = (body: string) => Promise<Record<string, unknown>>;
type Bench = { url: string; send: Send; label: string; pid: number };
type Settled = {
  rounds: Array<{ grouped: PhaseResult; single: PhaseResult }>;
  /** Sequential settlements: grouped devnet, then baseline. */
  sequential: PhaseResult[];
};

async function main(): Promise<void> {
  const ticksBefore = await cpuTicks();
  const grouped = await startDevnetProcess(undefined);
  // The baseline: one block per transaction, as the devnet mined before group commit.
  const single = await startDevnetProcess(1);
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const benchOf = (devnet: DevnetProcess, label: string): Bench => ({
    url: devnet.url,
    send: (body) => postJson(devnet.url, body, agent),
    label,
    pid: devnet.child.process.pid!,
  });
  const bench = benchOf(grouped, "");
  const baseline = benchOf(single, ", one block per tx");
  console.log(
    `devnet benchmark: ${grouped.url}, Node ${process.version}, ${availableParallelism()} CPUs, ` +
      `${SECONDS} s per phase, concurrency ${CONCURRENCY}, load average ${loadavg()[0]!.toFixed(2)}`,
  );
  const results: PhaseResult[] = [];
  let settled: Settled;
  try {
    // Warm-up, not reported: the first blocks also pay for JIT compilation.
    for (const target of [bench, baseline]) {
      await plainTransfers(target, 4, 200);
      await settlements(target, 4, 100);
    }

    for (const workers of [1, CONCURRENCY]) results.push(await plainTransfers(bench, workers, POOL));
    const sequential = [await settlements(bench, 1, POOL / 2), await settlements(baseline, 1, POOL / 2)];
    results.push(...sequential);
    // Grouped and baseline alternate, so a burst of load from the machine's other users weighs on
    // both; the summary compares their medians.
    const rounds: Array<{ grouped: PhaseResult; single: PhaseResult }> = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const label = ROUNDS > 1 ? ` (round ${round})` : "";
      const groupedRound = await settlements(bench, CONCURRENCY, POOL, label);
      const singleRound = await settlements(baseline, CONCURRENCY, POOL, label);
      rounds.push({ grouped: groupedRound, single: singleRound });
      results.push(groupedRound, singleRound);
    }
    settled = { rounds, sequential };

    // Reads: the direct-call baseline for the gateway benchmark.
    const read = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] });
    const reads = await runPhase(
      range(CONCURRENCY).map(() => repeat(read)),
      bench,
    );
    results.push({
      name: `eth_blockNumber, ${describeWorkers(CONCURRENCY)}`,
      ...reads,
      blocks: undefined,
      verified: "-",
    });
    printTable(results);
    console.log("");
    await printBaseFees(bench.url);
  } finally {
    agent.destroy();
    await grouped.child.stop();
    await single.child.stop();
  }
  const ticksAfter = await cpuTicks();
  printSummary(settled, ticksBefore, ticksAfter);
}

/** Native transfers of 1 wei from `workers` senders to one sink. */
async function plainTransfers(bench: Bench, workers: number, pool: number): Promise<PhaseResult> {
  const sink = newAccount().address;
  const senders = await fundedAccounts(bench.url, workers);
  const queues = await Promise.all(
    senders.map(async (sender) => {
      const bodies: string[] = [];
      for (const nonce of range(Math.ceil(pool / workers))) {
        const raw = await sender.signTransaction({
          chainId: CHAIN_ID,
          type: "eip1559",
          to: sink,
          value: 1n,
          nonce,
          gas: 21_000n,
          ...FEES,
        });
        bodies.push(rawTransactionBody(raw));
      }
      return bodies;
    }),
  );
  const run = await measuredPhase(bench, queues);
  const balance = BigInt((await rpc(bench.url, "eth_getBalance", [sink, "latest"])).result as string);
  return {
    name: `plain transfers, ${describeWorkers(workers)}${bench.label}`,
    ...run,
    verified: balance === BigInt(run.sent) ? "balance ok" : `BALANCE ${balance} != ${run.sent}`,
  };
}

/** NativeTransferAuth settlements of 1 unit: each worker's payer signs, its relayer submits. */
async function settlements(bench: Bench, workers: number, pool: number, label = ""): Promise<PhaseResult> {
  const payee = newAccount().address;
  const payers = await fundedAccounts(bench.url, workers);
  const relayers = await fundedAccounts(bench.url, workers);
  const queues = await Promise.all(
    relayers.map(async (relayer, w) => {
      const payer = payers[w]!;
      const bodies: string[] = [];
      for (const nonce of range(Math.ceil(pool / workers))) {
        const auth = transferAuthorization(payer.address, payee, 1n, {
          validBefore: BigInt(Math.floor(Date.now() / 1000) + 3_600),
        });
        const data = transferWithAuthorizationCalldata(auth, await signTransferAuthorization(payer, auth));
        const raw = await relayer.signTransaction({
          chainId: CHAIN_ID,
          type: "eip1559",
          to: NATIVE_TRANSFER_AUTH_ADDRESS,
          data,
          nonce,
          gas: 100_000n,
          ...FEES,
        });
        bodies.push(rawTransactionBody(raw));
      }
      return bodies;
    }),
  );
  const run = await measuredPhase(bench, queues);
  const balance = BigInt((await rpc(bench.url, "eth_getBalance", [payee, "latest"])).result as string);
  const expected = BigInt(run.sent) * WEI_PER_UNIT;
  return {
    name: `precompile settlements, ${describeWorkers(workers)}${bench.label}${label}`,
    ...run,
    verified: balance === expected ? "balance ok" : `BALANCE ${balance} != ${expected}`,
  };
}

/** runPhase, with the blocks the devnet mined meanwhile. */
async function measuredPhase(
  bench: Bench,
  queues: Array<Iterable<string>>,
): Promise<{
  sent: number;
  seconds: number;
  latencies: number[];
  blocks: number;
  cpuMs: number;
  mainMs: number;
}> {
  const before = await blockNumber(bench.url);
  const run = await runPhase(queues, bench);
  return { ...run, blocks: (await blockNumber(bench.url)) - before };
}

/**
 * Sends each worker's bodies one after another, workers in parallel, until time is up or the
 * bodies run out. Any JSON-RPC error aborts the benchmark: a failure must not pass as a figure.
 */
async function runPhase(
  queues: Array<Iterable<string>>,
  { send, pid }: Bench,
): Promise<{ sent: number; seconds: number; latencies: number[]; cpuMs: number; mainMs: number }> {
  const latencies: number[] = [];
  const cpuBefore = await cpuMsOf(`/proc/${pid}/stat`);
  const mainBefore = await mainThreadCpuMs(pid);
  const started = performance.now();
  const deadline = started + SECONDS * 1000;
  await Promise.all(
    queues.map(async (bodies) => {
      for (const body of bodies) {
        if (performance.now() >= deadline) return;
        const at = performance.now();
        const response = await send(body);
        if (response.error !== undefined)
          throw new Error(`request failed: ${JSON.stringify(response.error)}`);
        latencies.push(performance.now() - at);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return {
    sent: latencies.length,
    seconds,
    latencies,
    cpuMs: (await cpuMsOf(`/proc/${pid}/stat`)) - cpuBefore,
    mainMs: (await mainThreadCpuMs(pid)) - mainBefore,
  };
}

async function fundedAccounts(url: string, count: number): Promise<PrivateKeyAccount[]> {
  const accounts = range(count).map(() => newAccount());
  for (const account of accounts) await fund(url, account.address, usdc(1_000n));
  return accounts;
}

async function blockNumber(url: string): Promise<number> {
  return Number(BigInt((await rpc(url, "eth_blockNumber")).result as string));
}

function rawTransactionBody(raw: Hex): string {
  return JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] });
}

function printTable(results: PhaseResult[]): void {
  const rows = results.map((result) => [
    result.name,
    String(result.sent),
    result.seconds.toFixed(2),
    rate(result).toFixed(1),
    p50(result).toFixed(2),
    latencyAt(result, 0.99).toFixed(2),
    result.blocks === undefined ? "-" : txsPerBlock(result).toFixed(1),
    (result.cpuMs / result.sent).toFixed(2),
    (result.mainMs / result.sent).toFixed(2),
    result.verified,
  ]);
  const header = [
    "phase",
    "done",
    "seconds",
    "per second",
    "p50 ms",
    "p99 ms",
    "tx/block",
    "CPU ms/tx",
    "main ms/tx",
    "check",
  ];
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]): string =>
    cells
      .map((cell, i) =>
        i === 0 || i === cells.length - 1 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!),
      )
      .join("  ");
  console.log("");
  console.log(line(header));
  console.log(widths.map((width) => "-".repeat(width)).join("  "));
  for (const row of rows) console.log(line(row));
}

/**
 * Base fee over the grouped devnet's last blocks (EIP-1559, target half of the 30M gas limit):
 * busy blocks push it up 12.5 % per full block, lighter ones pull it down, so it shows whether
 * load makes fees climb enough to trouble clients that estimate from it.
 */
async function printBaseFees(url: string): Promise<void> {
  const history = (await rpc(url, "eth_feeHistory", ["0x400", "latest", []])).result as {
    baseFeePerGas: string[];
    gasUsedRatio: number[];
  };
  const fees = history.baseFeePerGas.map((fee) => BigInt(fee));
  // bigint: Math.min and Math.max do not apply.
  const ascending = [...fees].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const [min, max] = [ascending[0], ascending.at(-1)];
  const fullest = Math.max(...history.gasUsedRatio);
  console.log(
    `base fee over the last ${history.gasUsedRatio.length} blocks: ${fees[0]} → ${fees.at(-1)} wei ` +
      `(min ${min}, max ${max}); fullest block ${(fullest * 100).toFixed(1)} % of the gas limit`,
  );
}

function printSummary(
  settled: Settled,
  ticksBefore: CpuTicks | undefined,
  ticksAfter: CpuTicks | undefined,
): void {
  const grouped = median(settled.rounds.map((round) => rate(round.grouped)));
  const single = median(settled.rounds.map((round) => rate(round.single)));
  const perBlock = median(settled.rounds.map((round) => txsPerBlock(round.grouped)));
  const [groupedSequential, singleSequential] = settled.sequential as [PhaseResult, PhaseResult];
  console.log(
    `group commit, settlements at ${CONCURRENCY} concurrent, median of ${settled.rounds.length}: ` +
      `${grouped.toFixed(1)}/s in ${perBlock.toFixed(1)} tx/block, against ${single.toFixed(1)}/s with one ` +
      `block per transaction (× ${(grouped / single).toFixed(2)}; rounds ` +
      `${settled.rounds.map((round) => `${rate(round.grouped).toFixed(0)}/${rate(round.single).toFixed(0)}`).join(", ")})`,
  );
  console.log(
    `sequential settlement latency p50: ${p50(groupedSequential).toFixed(2)} ms grouped, ` +
      `${p50(singleSequential).toFixed(2)} ms one block per transaction ` +
      `(${txsPerBlock(groupedSequential).toFixed(1)} tx/block)`,
  );
  if (ticksBefore !== undefined && ticksAfter !== undefined) {
    const total = ticksAfter.total - ticksBefore.total;
    const steal = ticksAfter.steal - ticksBefore.steal;
    console.log(
      `CPU steal during the run: ${((steal / total) * 100).toFixed(1)} % (${steal} of ${total} ticks); ` +
        `load average now ${loadavg()[0]!.toFixed(2)}`,
    );
  } else {
    console.log("CPU steal during the run: unknown (no /proc/stat)");
  }
  console.log(
    `goal ≥ ${SETTLEMENT_GOAL_PER_SECOND} settlements/s at ${CONCURRENCY} concurrent: ` +
      `${grouped >= SETTLEMENT_GOAL_PER_SECOND ? "met" : "not met"} (${figureBeside(grouped, SETTLEMENT_GOAL_PER_SECOND, 0)}/s)`,
  );
}

type CpuTicks = { steal: number; total: number };

type DevnetProcess = { url: string; child: ManagedChild };

/** A devnet in its own process (bench/devnet-server.ts), once it listens. */
async function startDevnetProcess(maxTxsPerBlock: number | undefined): Promise<DevnetProcess> {
  let announce: (url: string) => void = () => {};
  const announced = new Promise<string>((resolve) => {
    announce = resolve;
  });
  const child = startChild({
    name: "devnet",
    entry: "bench/devnet-server.ts",
    // BENCH_CPU_PROF=<dir>: each devnet writes a CPU profile there when it stops.
    ...profiledProgram("bench/devnet-server.ts"),
    env: {
      ...process.env,
      BENCH_MAX_TXS_PER_BLOCK: maxTxsPerBlock === undefined ? "" : String(maxTxsPerBlock),
    },
    onLine: (line) => {
      const url = line.replace(/^\[devnet\] /, "");
      if (url.startsWith("http://")) announce(url);
    },
  });
  const url = await Promise.race([
    announced,
    child.exited.then((code) => {
      throw new Error(`the devnet exited (${code}) before it listened`);
    }),
  ]);
  return { url, child };
}

/** CPU time the hypervisor took from this VM (the "steal" column of /proc/stat), in ticks. */
async function cpuTicks(): Promise<CpuTicks | undefined> {
  try {
    const first = (await readFile("/proc/stat", "utf8")).split("\n")[0]!;
    // user nice system idle iowait irq softirq steal; guest time is already counted in user.
    const fields = first.trim().split(/\s+/).slice(1, 9).map(Number);
    return { steal: fields[7] ?? 0, total: fields.reduce((a, b) => a + b, 0) };
  } catch {
    return undefined;
  }
}

function rate(result: PhaseResult): number {
  return result.sent / result.seconds;
}

function txsPerBlock(result: PhaseResult): number {
  return result.blocks ? result.sent / result.blocks : 0;
}

function p50(result: PhaseResult): number {
  return latencyAt(result, 0.5);
}

function latencyAt(result: PhaseResult, q: number): number {
  const sorted = [...result.latencies].sort((a, b) => a - b);
  return sorted.length ? quantile(sorted, q) : 0;
}

function describeWorkers(workers: number): string {
  return workers === 1 ? "sequential" : `${workers} concurrent`;
}

function* repeat(body: string): Generator<string> {
  for (;;) yield body;
}

function range(count: number): number[] {
  return Array.from({ length: count }, (_, i) => i);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
