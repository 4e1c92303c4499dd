/**
 * `npm run bench:x402` (issue 13): what a paid request costs, in one run, three ways:
 *   (a) ours: GET {edge}/77/x402/demo of the local stack (`npm start`, edge in Miniflare), paid by
 *       the official `@x402/fetch` client with funded viem local accounts;
 *   (b) the reference: a Hono server with `@x402/hono`'s payment middleware and the official
 *       `@x402/evm` facilitator in process, settling on the same devnet from one settler account
 *       given viem's nonceManager, paid by the same client; and once more without the
 *       nonceManager, at 8 payers for 60 payments, to print how many fail;
 *   (c) the chain floor: a bare `transferWithAuthorization` signed and sent straight to the devnet
 *       and its receipt read.
 * Each: latency from the first unpaid GET to the 200 (p50, p99) and payments per second at
 * BENCH_PAYERS (16) concurrent payers for BENCH_SECONDS. Goals at the end: our p50 ≤ 0.5× the
 * reference's, our throughput ≥ 2× the reference's, our p50 within 2× of the chain floor.
 */
import { appendFileSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Hex } from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { fund, newAccount, usdc } from "../devnet/testing.ts";
import {
  bareSettlementPayer,
  fetchPayer,
  type LoadResult,
  type LoadSummary,
  runLoad,
  summarize,
} from "./bench/x402-load.ts";
import { startReferenceServer } from "./bench/x402-reference.ts";
import { startStealMeter } from "./lib/cpu-steal.ts";
import { createLocalStack, postmasterPid } from "./lib/local-stack.ts";
import { type CpuRoot, cpuDelta, treeCpuSeconds } from "./lib/proc-cpu.ts";
import { childPidsNamed } from "./lib/proc-memory.ts";
import { freePort } from "./test/free-port.ts";

const PAYERS = Number(process.env.BENCH_PAYERS ?? 16);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
/** viem's receipt polling for the reference's settler (its default, 4 s, would be unfair to it). */
const REFERENCE_POLL_MS = Number(process.env.BENCH_REFERENCE_POLL_MS ?? 20);
const AMOUNT_UNITS = 10_000n;

const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

async function fundedAccounts(devnetUrl: string, count: number): Promise<PrivateKeyAccount[]> {
  const accounts = Array.from({ length: count }, () => newAccount());
  for (const account of accounts) await fund(devnetUrl, account.address, usdc(1_000n));
  return accounts;
}

function describe(name: string, s: LoadSummary): string {
  return `| ${name} | ${s.p50.toFixed(1)} | ${s.p99.toFixed(1)} | ${s.perSecond.toFixed(1)} | ${s.paid} | ${s.failed} |`;
}

async function main(): Promise<void> {
  say(`bench:x402 — ${PAYERS} concurrent payers, ${SECONDS} s per phase`);
  const dataDir = await mkdtemp(path.join(tmpdir(), "bench-x402-"));
  await chmod(dataDir, 0o755);
  say(`starting the local stack (as npm start does) in ${dataDir}…`);
  const local = createLocalStack({
    dataDir,
    originPort: await freePort(),
    devnetPort: await freePort(),
    edgePort: await freePort(),
    pgPort: await freePort(),
    basePath: "/77",
    envId: "local-dev",
    say: () => {},
    // BENCH_STACK_LOG=FILE keeps the stack's output (the origin's log among it) for a failed run.
    onPartLine: (line) => {
      if (process.env.BENCH_STACK_LOG) appendFileSync(process.env.BENCH_STACK_LOG, `${line}\n`);
    },
    // e.g. BENCH_ORIGIN_NODE_OPTIONS="--import ./profile.mjs" (a preload starting node:inspector's
    // profiler: --cpu-prof itself is not allowed in NODE_OPTIONS) to see where the origin's time goes
    originEnv: { LOG_LEVEL: "warn", NODE_OPTIONS: process.env.BENCH_ORIGIN_NODE_OPTIONS ?? "" },
  });
  const closers: Array<() => Promise<void>> = [
    async () => {
      await local.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  ];
  try {
    const stack = await local.start();
    const devnetUrl = stack.devnetUrl;
    const payTo = newAccount().address;
    const steal = await startStealMeter();
    const [workerd] = await childPidsNamed("workerd");
    // Each process alone but Postgres (a child per connection). "bench" holds the payers' client
    // and, in (b), the reference server and its facilitator, which run in this process.
    const roots: Record<string, CpuRoot> = {
      devnet: { pid: stack.children.devnet.process.pid, tree: false },
      enclave: { pid: stack.children.enclave.process.pid, tree: false },
      origin: { pid: stack.children.origin.process.pid, tree: false },
      edge: { pid: workerd, tree: false },
      postgres: { pid: await postmasterPid(path.join(dataDir, "pg")), tree: true },
      bench: { pid: process.pid, tree: false },
    };
    const cpuLines: string[] = [];
    /** Runs a measured phase and notes the CPU each process spent per payment in it. */
    const measured = async (name: string, run: () => Promise<LoadResult>): Promise<LoadResult> => {
      const before = await treeCpuSeconds(roots);
      const result = await run();
      const spent = cpuDelta(before, await treeCpuSeconds(roots));
      const paid = Math.max(1, result.latenciesMs.length);
      const parts = Object.entries(spent)
        .filter(([, seconds]) => seconds > 0)
        .map(([process, seconds]) => `${process} ${((seconds * 1000) / paid).toFixed(2)}`);
      cpuLines.push(`    ${name}: CPU ms per payment: ${parts.join(", ")}`);
      return result;
    };

    // (c) the chain floor.
    say("(c) chain floor: bare transferWithAuthorization straight to the devnet…");
    const floorPayers = await fundedAccounts(devnetUrl, PAYERS);
    const relayers = await fundedAccounts(devnetUrl, PAYERS);
    const floorPays = floorPayers.map((payer, index) =>
      bareSettlementPayer({ devnetUrl, payer, relayer: relayers[index]!, payTo, amountUnits: AMOUNT_UNITS }),
    );
    await runLoad({ payers: floorPays, total: PAYERS }); // warm-up
    const floorRun = await measured("(c) chain floor", () =>
      runLoad({ payers: floorPays, seconds: SECONDS }),
    );
    const floor = summarize(floorRun);
    if (floor.failed > 0) say(`    failures: ${floorRun.reasons.join("; ")}`);

    // (b) the reference stack, at its best (nonceManager), then without it.
    say("(b) reference: @x402/hono + @x402/evm facilitator in process, settler with viem's nonceManager…");
    const payers = await fundedAccounts(devnetUrl, PAYERS);
    const startReference = async (nonceManager: boolean) => {
      const settlerKey: Hex = generatePrivateKey();
      await fund(devnetUrl, privateKeyToAccount(settlerKey).address, usdc(1_000n));
      const server = await startReferenceServer({
        devnetUrl,
        port: await freePort(),
        settlerKey,
        payTo,
        nonceManager,
        pollingIntervalMs: REFERENCE_POLL_MS,
      });
      closers.push(() => server.close());
      return server;
    };
    const reference = await startReference(true);
    const referencePays = payers.map((payer) => fetchPayer(reference.url, payer));
    await runLoad({ payers: referencePays, total: PAYERS });
    const referenceRun = await measured("(b) reference", () =>
      runLoad({ payers: referencePays, seconds: SECONDS }),
    );
    const ref = summarize(referenceRun);
    if (ref.failed > 0) say(`    failures: ${referenceRun.reasons.join("; ")}`);

    say("    and without the nonceManager: 60 payments by 8 payers…");
    const bare = await startReference(false);
    const bareRun = await runLoad({
      payers: payers.slice(0, 8).map((payer) => fetchPayer(bare.url, payer)),
      total: 60,
    });
    const bareFailures = `${bareRun.failed} of ${bareRun.failed + bareRun.latenciesMs.length}`;

    // (a) ours, through the edge.
    const demoUrl = `${stack.edgeUrl}/77/x402/demo`;
    say(`(a) ours: ${demoUrl} through the edge, paid by @x402/fetch…`);
    const probe = await fetch(demoUrl);
    let ours: LoadSummary | undefined;
    if (probe.status !== 402) {
      say(`    not measured: the demo answered ${probe.status}, not 402 (is the demo route on this branch?)`);
    } else {
      const ourPays = payers.map((payer) => fetchPayer(demoUrl, payer));
      await runLoad({ payers: ourPays, total: PAYERS });
      const ourRun = await measured("(a) ours", () => runLoad({ payers: ourPays, seconds: SECONDS }));
      ours = summarize(ourRun);
      if (ours.failed > 0) say(`    failures: ${ourRun.reasons.join("; ")}`);
    }
    say(await steal());

    say("");
    say("| path | p50 ms | p99 ms | payments/s | paid | failed |");
    say("|---|---|---|---|---|---|");
    if (ours) say(describe(`(a) ours, through the edge (${PAYERS} payers)`, ours));
    say(describe(`(b) reference, nonceManager (${PAYERS} payers)`, ref));
    say(describe(`(c) chain floor (${PAYERS} payers)`, floor));
    say(`reference without the nonceManager, 8 payers: ${bareFailures} paid requests failed`);
    for (const line of cpuLines) say(line);
    if (bareRun.reasons.length > 0) say(`    e.g. ${bareRun.reasons[0]}`);
    say("");
    const goal = (text: string, met: boolean | undefined, figure: string): void =>
      say(
        `goal ${text}: ${met === undefined ? "not met (not measured)" : met ? "met" : "not met"} (${figure})`,
      );
    goal(
      "our p50 ≤ 0.5× the reference's",
      ours && ours.p50 <= 0.5 * ref.p50,
      ours ? `${(ours.p50 / ref.p50).toFixed(2)}×` : "no figure",
    );
    goal(
      "our throughput ≥ 2× the reference's",
      ours && ours.perSecond >= 2 * ref.perSecond,
      ours ? `${(ours.perSecond / ref.perSecond).toFixed(2)}×` : "no figure",
    );
    goal(
      "our p50 within 2× of the chain floor",
      ours && ours.p50 <= 2 * floor.p50,
      ours ? `${(ours.p50 / floor.p50).toFixed(2)}×` : "no figure",
    );
  } finally {
    for (const close of closers.reverse()) await close().catch(() => {});
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(
      `bench:x402: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
