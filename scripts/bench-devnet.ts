/**
 * `npm run bench:devnet`: throughput of the devnet, in-process on loopback.
 *
 * Transactions are signed before each phase starts, then sent over HTTP with
 * eth_sendRawTransaction; the devnet automines, so a returned call is a mined (settled)
 * transaction. Each phase runs for BENCH_SECONDS (default 3) or until its signed transactions
 * run out, and is checked afterwards against the recipient's balance.
 *
 * Phases: plain native transfers and NativeTransferAuth settlements (transferWithAuthorization
 * submitted by relayers), each sequential and with CONCURRENCY senders in parallel; then
 * eth_blockNumber reads, the baseline for the gateway's /rpc benchmark.
 */
import { Agent, request } from "node:http";
import { availableParallelism } from "node:os";
import { type Hex, parseGwei } from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { startDevnet } from "../devnet/index.ts";
import {
  fund,
  newAccount,
  rpc,
  signTransferAuthorization,
  transferAuthorization,
  transferWithAuthorizationCalldata,
  usdc,
} from "../devnet/testing.ts";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../shared/constants.ts";
import { quantile } from "./lib/stats.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
/** Signed ahead per phase; comfortably more than the devnet mines in SECONDS on a laptop. */
const POOL = Number(process.env.BENCH_POOL ?? 1_500);
const FEES = { maxFeePerGas: parseGwei("3"), maxPriorityFeePerGas: parseGwei("1") };

type PhaseResult = { name: string; sent: number; seconds: number; latencies: number[]; verified: string };
type Send = (body: string) => Promise<Record<string, unknown>>;
type Bench = { url: string; send: Send };

async function main(): Promise<void> {
  const devnet = await startDevnet({ port: 0 });
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  const bench: Bench = { url: devnet.url, send: (body) => post(devnet.url, body, agent) };
  console.log(
    `devnet benchmark: ${devnet.url}, Node ${process.version}, ${availableParallelism()} CPUs, ` +
      `${SECONDS} s per phase, concurrency ${CONCURRENCY}`,
  );
  const results: PhaseResult[] = [];
  try {
    // Warm-up, not reported: the first blocks also pay for JIT compilation.
    await plainTransfers(bench, 4, 200);
    await settlements(bench, 4, 100);

    for (const workers of [1, CONCURRENCY]) results.push(await plainTransfers(bench, workers, POOL));
    for (const workers of [1, CONCURRENCY]) results.push(await settlements(bench, workers, POOL / 2));

    // Reads: the direct-call baseline for the gateway benchmark.
    const read = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] });
    const reads = await runPhase(
      range(CONCURRENCY).map(() => repeat(read)),
      bench.send,
    );
    results.push({ name: `eth_blockNumber, ${describeWorkers(CONCURRENCY)}`, ...reads, verified: "-" });
  } finally {
    agent.destroy();
    await devnet.close();
  }
  printTable(results);
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
  const run = await runPhase(queues, bench.send);
  const balance = BigInt((await rpc(bench.url, "eth_getBalance", [sink, "latest"])).result as string);
  return {
    name: `plain transfers, ${describeWorkers(workers)}`,
    ...run,
    verified: balance === BigInt(run.sent) ? "balance ok" : `BALANCE ${balance} != ${run.sent}`,
  };
}

/** NativeTransferAuth settlements of 1 unit: each worker's payer signs, its relayer submits. */
async function settlements(bench: Bench, workers: number, pool: number): Promise<PhaseResult> {
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
  const run = await runPhase(queues, bench.send);
  const balance = BigInt((await rpc(bench.url, "eth_getBalance", [payee, "latest"])).result as string);
  const expected = BigInt(run.sent) * WEI_PER_UNIT;
  return {
    name: `precompile settlements, ${describeWorkers(workers)}`,
    ...run,
    verified: balance === expected ? "balance ok" : `BALANCE ${balance} != ${expected}`,
  };
}

/**
 * Sends each worker's bodies one after another, workers in parallel, until time is up or the
 * bodies run out. Any JSON-RPC error aborts the benchmark: a failure must not pass as a figure.
 */
async function runPhase(
  queues: Array<Iterable<string>>,
  send: Send,
): Promise<{ sent: number; seconds: number; latencies: number[] }> {
  const latencies: number[] = [];
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
  return { sent: latencies.length, seconds: (performance.now() - started) / 1000, latencies };
}

async function fundedAccounts(url: string, count: number): Promise<PrivateKeyAccount[]> {
  const accounts = range(count).map(() => newAccount());
  for (const account of accounts) await fund(url, account.address, usdc(1_000n));
  return accounts;
}

function rawTransactionBody(raw: Hex): string {
  return JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] });
}

function post(url: string, body: string, agent: Agent): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => {
          try {
            resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>);
          } catch (error) {
            reject(error);
          }
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function printTable(results: PhaseResult[]): void {
  const rows = results.map((result) => {
    const sorted = [...result.latencies].sort((a, b) => a - b);
    const at = (q: number): string => (sorted.length ? quantile(sorted, q) : 0).toFixed(2);
    return [
      result.name,
      String(result.sent),
      result.seconds.toFixed(2),
      (result.sent / result.seconds).toFixed(1),
      at(0.5),
      at(0.99),
      result.verified,
    ];
  });
  const header = ["phase", "done", "seconds", "per second", "p50 ms", "p99 ms", "check"];
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
