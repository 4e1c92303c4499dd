/**
 * `npm run bench:x402` (docs/performance.md, "x402 settlement"): what a paid request costs, in one
 * run, three ways:
 *   (a) ours: GET {edge}/77/x402/demo of the local stack (`npm start`, edge in Miniflare), paid by
 *       the official `@x402/fetch` client with funded viem local accounts. The payers reach the
 *       edge worker itself, on its own workerd socket, with CF-Connecting-IP set as Cloudflare's
 *       network sets it, each payer its own address. What stands in for that network locally is not part of the service:
 *       `npm start`'s Node front (dev/edge.ts), which would run in this process beside the
 *       payers, and Miniflare's entry worker in front of ours (request.cf, its dev routes), which
 *       on Cloudflare runs on Cloudflare's machines;
 *   (b) the reference: a Hono server with `@x402/hono`'s payment middleware and the official
 *       `@x402/evm` facilitator in its process (one of its own, bench/x402-reference.ts), settling
 *       on the same devnet from one settler account given viem's nonceManager, paid by the same
 *       client from this process; and once more without the nonceManager, at 8 payers for 60
 *       payments, to print how many fail;
 *   (c) the chain floor: a bare `transferWithAuthorization` signed and sent straight to the devnet
 *       and its receipt read;
 *   (d) agents paying the same demo through our client's fetchWithPayment, which has the gateway
 *       (POST /x402/authorize, through the edge) sign each quote with the agent's enclave key;
 *   (e) the same with a spending policy on every agent (docs/agents.md#your-spending-policy: the
 *       demo's payee listed, every x402 budget set, none reached), other agents: the cost of the
 *       policy's read and checks under the day's lock and of the enclave's re-check.
 *   (f) ours as in (a) with the demo's signed offers and receipts off (AGENT_X402_OFFER_RECEIPTS_DISABLED,
 *       the origin restarted with it) and (g) with them on and a payment id on every payment
 *       (docs/x402.md#payment-identifiers), other payers: what the two extensions cost a paid request.
 *       Each round restarts the origin once, from one setting to the other, and warms it up again.
 * Each: latency from the first unpaid GET to the 200 (p50, p99) and payments per second at
 * BENCH_PAYERS (16) concurrent payers for BENCH_SECONDS. The three run in turn, BENCH_ROUNDS (3)
 * times; each ratio is taken within a round (this shared VM's speed drifts between minutes) and
 * the goals judge the median of the rounds' ratios: our p50 ≤ 0.35× the reference's, our
 * throughput ≥ 3× the reference's, our p50 ≤ 1.3× the chain floor's; with a policy on every
 * agent, p50 and throughput within 10 % of (d)'s; with receipts and payment ids (g), p50 and
 * throughput within 10 % of (f)'s. Beside each path's CPU per payment it names the tables
 * Postgres's autovacuum worked on during its phases, and in which: that CPU includes the work, and
 * on two shared cores it slows whichever path runs meanwhile, the reference's too.
 *
 * With BENCH_GROW=1 it measures instead how the cost of (a) grows with the payers paying at once
 * (bench/grow.ts): 1, 8, 32 and 128 payers, each level with payers of its own, each payer from an
 * address of its own, for BENCH_SECONDS each.
 */
import { appendFileSync } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Hex } from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { createGatewayClient } from "../client/index.ts";
import { provisionWhenKeyFree } from "../dev/local-agent.ts";
import { LOCAL_X402_AMOUNT_UNITS } from "../dev/local-policy.ts";
import { createLocalStack, postmasterPid } from "../dev/local-stack.ts";
import { payFromOperatorPool } from "../dev/operator-pool.ts";
import { fund, newAccount, usdc } from "../devnet/testing.ts";
import { connectDatabase } from "../origin/db/client.ts";
import type { AgentPolicyDocument } from "../shared/agent-policy.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { freePort } from "../testing/free-port.ts";
import { watchAutovacuum } from "../testing/measure/autovacuum.ts";
import { startStealMeter } from "../testing/measure/cpu-steal.ts";
import { figureBeside } from "../testing/measure/goal-figure.ts";
import {
  PG_STATEMENTS_SETTINGS,
  phaseStatements,
  statementsToShow,
} from "../testing/measure/pg-statements.ts";
import { type CpuRoot, cpuDelta, treeCpuSeconds } from "../testing/measure/proc-cpu.ts";
import { childPidsNamed } from "../testing/measure/proc-memory.ts";
import { median } from "../testing/measure/stats.ts";
import { growing, growLevels, levelName, measureLevels, printGrowth } from "./grow.ts";
import {
  agentPayer,
  bareSettlementPayer,
  fetchFromIp,
  fetchPayer,
  type LoadResult,
  type LoadSummary,
  type Pay,
  runLoad,
  summarize,
} from "./x402-load.ts";
import { startReferenceProcess } from "./x402-reference.ts";

const PAYERS = Number(process.env.BENCH_PAYERS ?? 16);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/**
 * Seconds of unmeasured payments on each path before its first measured phase, and after each origin
 * restart: the JIT is still optimising the processes' code well past a few payments, and a warm-up
 * of one payment per payer left round 1's (a) colder than the phases after it (docs/performance.md).
 */
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 4);
/** viem's receipt polling for the reference's settler (its default, 4 s, would be unfair to it). */
const REFERENCE_POLL_MS = Number(process.env.BENCH_REFERENCE_POLL_MS ?? 20);
const AMOUNT_UNITS = 10_000n;
/** BENCH_PG_STATEMENTS=<n>: each path's n costliest statements (docs/development.md). */
const SHOW_STATEMENTS = statementsToShow();
/** A growing run (bench/grow.ts) and its levels of concurrent payers. */
const GROW = growing();
const GROW_LEVELS = GROW ? growLevels() : [];
/** Every x402 rule set for the demo's payee, none reached by the run (the figures far above what it pays). */
const benchPolicy = (payTo: string): AgentPolicyDocument => ({
  x402: {
    payees: [
      {
        pay_to: payTo,
        per_payment_units: LOCAL_X402_AMOUNT_UNITS.toString(),
        daily_units: "1000000000",
      },
    ],
    daily_units: "1000000000",
    daily_count: 1_000,
    unknown_payee: "deny",
  },
});

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
  say(
    GROW
      ? `bench:x402, growing — (a) at ${GROW_LEVELS.join(", ")} concurrent payers, ${SECONDS} s per level`
      : `bench:x402 — ${PAYERS} concurrent payers, ${SECONDS} s per phase`,
  );
  const dataDir = await mkdtemp(path.join(tmpdir(), "bench-x402-"));
  await chmod(dataDir, 0o755);
  say(`starting the local stack (as npm start does) in ${dataDir}…`);
  const local = createLocalStack({
    dataDir,
    originPort: await freePort(),
    devnetPort: await freePort(),
    edgePort: await freePort(),
    edgeDirectSocket: true,
    pgPort: await freePort(),
    pgSettings: SHOW_STATEMENTS === undefined ? undefined : PG_STATEMENTS_SETTINGS,
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
    // Each process alone but Postgres (a child per connection). "bench" holds the payers' client;
    // (b) adds the reference's process (its server and facilitator).
    const roots: Record<string, CpuRoot> = {
      devnet: { pid: stack.children.devnet.process.pid, tree: false },
      enclave: { pid: stack.children.enclave.process.pid, tree: false },
      origin: { pid: stack.children.origin.process.pid, tree: false },
      edge: { pid: workerd, tree: false },
      postgres: { pid: await postmasterPid(path.join(dataDir, "pg")), tree: true, reaped: true },
      bench: { pid: process.pid, tree: false },
    };
    /** CPU seconds each process spent in a path's measured phases, and the payments they made. */
    const cpu = new Map<
      string,
      { spent: Record<string, number>; paid: number; phases: number; autovacuum: string[] }
    >();
    const statements = await phaseStatements(stack.postgres.url, SHOW_STATEMENTS);
    closers.push(() => statements.close());
    const autovacuum = await watchAutovacuum(stack.postgres.url);
    closers.push(() => autovacuum.close());
    /**
     * Runs a measured phase and adds the CPU each process spent in it to its path's total, and the
     * tables Postgres's autovacuum worked on meanwhile (which that CPU includes) to its list.
     */
    const measured = async (
      name: string,
      run: () => Promise<LoadResult>,
      more: Record<string, CpuRoot> = {},
    ): Promise<LoadSummary> => {
      const phaseRoots = { ...roots, ...more };
      // The statements' snapshots outside the CPU's, so that reading them is not the phase's CPU.
      const { result, spent, tables } = await statements.during(name, async () => {
        const before = await treeCpuSeconds(phaseRoots);
        const { value: result, tables } = await autovacuum.during(run);
        return { result, tables, spent: cpuDelta(before, await treeCpuSeconds(phaseRoots)) };
      });
      const total = cpu.get(name) ?? { spent: {}, paid: 0, phases: 0, autovacuum: [] };
      for (const [process, seconds] of Object.entries(spent))
        total.spent[process] = (total.spent[process] ?? 0) + seconds;
      total.paid += result.latenciesMs.length;
      total.phases += 1;
      if (tables.length > 0) total.autovacuum.push(`${tables.join(", ")} (phase ${total.phases})`);
      cpu.set(name, total);
      const summary = summarize(result);
      if (summary.failed > 0) say(`    ${name} failures: ${result.reasons.join("; ")}`);
      return summary;
    };

    if (GROW) {
      // (a) only, at each level: payers of its own from addresses of their own (198.18.0.0/15), so
      // the origin's per-client x402 window counts each alone, as it would separate clients.
      const demoUrl = `${stack.edge.directUrl!.origin}/77/x402/demo`;
      const total = GROW_LEVELS.reduce((sum, payers) => sum + payers, 0);
      say(`funding ${PAYERS + total} payers…`);
      const growPayers = await fundedAccounts(devnetUrl, PAYERS + total);
      const pays = growPayers.map((payer, index) =>
        fetchPayer(demoUrl, payer, {
          "cf-connecting-ip": `198.18.${2 + Math.floor(index / 250)}.${1 + (index % 250)}`,
        }),
      );
      const warmup = await runLoad({ payers: pays.splice(0, PAYERS), total: 4 * PAYERS });
      if (warmup.failed > 0) say(`    warm-up failures: ${warmup.reasons.join("; ")}`);
      say(
        "levels (wall per payment: the level's length over the payments made; p50 from the unpaid GET to the 200):",
      );
      const costs = await measureLevels(
        GROW_LEVELS,
        roots,
        async (payers) => {
          // Its statements (BENCH_PG_STATEMENTS) are read inside its CPU figures: a few ms of
          // Postgres's CPU a level, against seconds.
          const result = await statements.during(levelName(payers), () =>
            runLoad({ payers: pays.splice(0, payers), seconds: SECONDS }),
          );
          if (result.failed > 0)
            say(`    ${payers} payers: ${result.failed} failed: ${result.reasons.join("; ")}`);
          return {
            count: result.latenciesMs.length,
            latenciesMs: result.latenciesMs,
            elapsedMs: result.elapsedMs,
          };
        },
        say,
      );
      say(await steal());
      printGrowth("bench:x402, (a) paid demo requests through the edge", "payment", costs, say);
      for (const cost of costs) {
        const lines = statements.describe(levelName(cost.clients), cost.count, "payment");
        if (lines.length > 0) say(`  ${levelName(cost.clients)}, statements:`);
        for (const line of lines) say(line);
      }
      return;
    }

    // (c) the chain floor.
    const floorPayers = await fundedAccounts(devnetUrl, PAYERS);
    const relayers = await fundedAccounts(devnetUrl, PAYERS);
    const floorPays = floorPayers.map((payer, index) =>
      bareSettlementPayer({ devnetUrl, payer, relayer: relayers[index]!, payTo, amountUnits: AMOUNT_UNITS }),
    );
    await runLoad({ payers: floorPays, seconds: WARMUP_SECONDS }); // warm-up

    // (b) the reference stack, at its best (nonceManager); once without it, to count failures.
    const payers = await fundedAccounts(devnetUrl, PAYERS);
    const startReference = async (nonceManager: boolean) => {
      const settlerKey: Hex = generatePrivateKey();
      await fund(devnetUrl, privateKeyToAccount(settlerKey).address, usdc(1_000n));
      const server = await startReferenceProcess({
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
    // The reference's process beside the stack's in (b); its payers are in this one, as every path's are.
    const referenceRoot: Record<string, CpuRoot> = { reference: { pid: reference.pid, tree: false } };
    const referencePays = payers.map((payer) => fetchPayer(reference.url, payer));
    await runLoad({ payers: referencePays, seconds: WARMUP_SECONDS });
    say("reference without viem's nonceManager: 60 payments by 8 payers…");
    const bare = await startReference(false);
    const bareRun = await runLoad({
      payers: payers.slice(0, 8).map((payer) => fetchPayer(bare.url, payer)),
      total: 60,
    });

    // (a) ours, through the edge.
    const demoUrl = `${stack.edge.directUrl!.origin}/77/x402/demo`;
    const probe = await fetch(demoUrl);
    const oursMeasured = probe.status === 402;
    if (!oursMeasured) {
      say(`(a) not measured: the demo answered ${probe.status}, not 402 (is the demo route on this branch?)`);
    }
    // Each payer from an address of its own (198.18.0.0/15, RFC 2544's benchmarking range), as
    // sixteen clients would be: the origin's per-client x402 window counts each payer alone.
    const ourPays = payers.map((payer, index) =>
      fetchPayer(demoUrl, payer, { "cf-connecting-ip": `198.18.0.${index + 1}` }),
    );
    if (oursMeasured) await runLoad({ payers: ourPays, seconds: WARMUP_SECONDS });
    // (f) and (g): payers of their own, from addresses of their own, so no per-client window is shared.
    const plainPayers = await fundedAccounts(devnetUrl, PAYERS);
    const identifiedPayers = await fundedAccounts(devnetUrl, PAYERS);
    const plainPays = plainPayers.map((payer, index) =>
      fetchPayer(demoUrl, payer, { "cf-connecting-ip": `198.18.2.${index + 1}` }),
    );
    const identifiedPays = identifiedPayers.map((payer, index) =>
      fetchPayer(demoUrl, payer, { "cf-connecting-ip": `198.18.3.${index + 1}` }, { paymentIds: true }),
    );
    let receiptsOn = true;
    /** Restarts the origin with offers and receipts on or off, and warms it up with `warm`'s payments. */
    const switchReceipts = async (on: boolean, warm: Pay[]): Promise<void> => {
      await stack.restartOrigin(on ? {} : { AGENT_X402_OFFER_RECEIPTS_DISABLED: "true" });
      roots.origin = { pid: stack.children.origin.process.pid, tree: false };
      receiptsOn = on;
      await runLoad({ payers: warm, seconds: WARMUP_SECONDS });
    };
    if (oursMeasured) await runLoad({ payers: identifiedPays, seconds: WARMUP_SECONDS });

    // (d) and (e): agents made as an operator makes them (keys from the local stack's stock),
    // funded from the operator pool; (e)'s each set its own policy, as an agent tightens its own.
    say(`provisioning ${2 * PAYERS} agents…`);
    const database = connectDatabase({ url: stack.postgres.url, maxConnections: 2 });
    closers.push(() => database.close());
    const baseUrl = `${stack.edge.directUrl!.origin}/77`;
    const newAgentPayers = async (count: number, firstIp: number, policy: AgentPolicyDocument | null) => {
      const pays = [];
      for (let index = 0; index < count; index++) {
        const agent = await provisionWhenKeyFree(database.db, ["read", "transfer"], 120_000);
        if (!agent) throw new Error("no verified key became free for the bench's agents");
        await payFromOperatorPool(devnetUrl, agent.wallet as Hex, 100n * 1_000_000n * WEI_PER_UNIT);
        const ip = `198.18.1.${firstIp + index}`;
        if (policy) {
          await createGatewayClient({ baseUrl, token: agent.token, fetch: fetchFromIp(ip) }).updatePolicy(
            policy,
          );
        }
        pays.push(agentPayer({ url: demoUrl, baseUrl, token: agent.token, ip }));
      }
      return pays;
    };
    const agentPays = await newAgentPayers(PAYERS, 1, null);
    if (!stack.x402PayTo) throw new Error("the local stack has no x402 payTo sealed");
    const governedPays = await newAgentPayers(PAYERS, 101, benchPolicy(stack.x402PayTo));
    if (oursMeasured) {
      await runLoad({ payers: agentPays, seconds: WARMUP_SECONDS });
      await runLoad({ payers: governedPays, seconds: WARMUP_SECONDS });
    }

    type Round = {
      floor: LoadSummary;
      ref: LoadSummary;
      ours: LoadSummary | undefined;
      agents: LoadSummary | undefined;
      governed: LoadSummary | undefined;
      plain: LoadSummary | undefined;
      identified: LoadSummary | undefined;
    };
    const rounds: Round[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      say(
        `round ${round} of ${ROUNDS}: (c) chain floor, (b) reference, (a) ours (${demoUrl}), (d) agents, (e) agents with policies, (f) receipts off and (g) receipts and payment ids…`,
      );
      let plain: LoadSummary | undefined;
      let identified: LoadSummary | undefined;
      const plainPhase = () =>
        measured("(f) ours, receipts off", () => runLoad({ payers: plainPays, seconds: SECONDS }));
      const identifiedPhase = () =>
        measured("(g) ours, receipts and payment ids", () =>
          runLoad({ payers: identifiedPays, seconds: SECONDS }),
        );
      if (oursMeasured && !receiptsOn) {
        plain = await plainPhase();
        await switchReceipts(true, identifiedPays);
      }
      const floor = await measured("(c) chain floor", () => runLoad({ payers: floorPays, seconds: SECONDS }));
      const ref = await measured(
        "(b) reference",
        () => runLoad({ payers: referencePays, seconds: SECONDS }),
        referenceRoot,
      );
      const ours = oursMeasured
        ? await measured("(a) ours", () => runLoad({ payers: ourPays, seconds: SECONDS }))
        : undefined;
      // (d) and (e) swap places each round, so neither always follows the other's load.
      const agentPhase = () => measured("(d) agents", () => runLoad({ payers: agentPays, seconds: SECONDS }));
      const governedPhase = () =>
        measured("(e) agents with policies", () => runLoad({ payers: governedPays, seconds: SECONDS }));
      let agents: LoadSummary | undefined;
      let governed: LoadSummary | undefined;
      if (oursMeasured && round % 2 === 1) {
        agents = await agentPhase();
        governed = await governedPhase();
      } else if (oursMeasured) {
        governed = await governedPhase();
        agents = await agentPhase();
      }
      // (g) with receipts on, after (a), (d) and (e), which always see them on; (f) with them off,
      // at the end of a round that starts with them on, at the start of the next: the origin
      // restarts once a round, and (f) and (g) swap places each round.
      if (oursMeasured) identified = await identifiedPhase();
      if (oursMeasured && !plain) {
        await switchReceipts(false, plainPays);
        plain = await plainPhase();
      }
      rounds.push({ floor, ref, ours, agents, governed, plain, identified });
    }
    say(await steal());

    say("");
    say("| round | path | p50 ms | p99 ms | payments/s | paid | failed |");
    say("|---|---|---|---|---|---|---|");
    rounds.forEach((round, index) => {
      if (round.ours) say(describe(`${index + 1} | (a) ours, through the edge`, round.ours));
      if (round.agents) say(describe(`${index + 1} | (d) agents, our client`, round.agents));
      if (round.governed) say(describe(`${index + 1} | (e) agents with a policy each`, round.governed));
      if (round.plain) say(describe(`${index + 1} | (f) ours, offers and receipts off`, round.plain));
      if (round.identified)
        say(describe(`${index + 1} | (g) ours, receipts and payment ids on`, round.identified));
      say(describe(`${index + 1} | (b) reference, nonceManager`, round.ref));
      say(describe(`${index + 1} | (c) chain floor`, round.floor));
    });
    const bareFailures = `${bareRun.failed} of ${bareRun.failed + bareRun.latenciesMs.length}`;
    say(`reference without the nonceManager, 8 payers: ${bareFailures} paid requests failed`);
    if (bareRun.reasons.length > 0) say(`    the first failure: ${bareRun.reasons[0]}`);
    for (const [name, total] of cpu) {
      const parts = Object.entries(total.spent)
        .filter(([, seconds]) => seconds > 0)
        .map(([process, seconds]) => `${process} ${((seconds * 1000) / Math.max(1, total.paid)).toFixed(2)}`);
      const maintenance = total.autovacuum.length > 0 ? `; autovacuum: ${total.autovacuum.join("; ")}` : "";
      say(`    ${name}: CPU ms per payment: ${parts.join(", ")}${maintenance}`);
      for (const line of statements.describe(name, total.paid, "payment")) say(line);
    }
    say("");
    /** Each round's ratio of ours to another path, and their median; undefined when ours was not measured. */
    const ratios = (of: (round: Round) => number | undefined) => {
      const each = rounds.map(of).filter((value): value is number => value !== undefined);
      return each.length === 0 ? undefined : { each, median: median(each) };
    };
    /** A goal's line: its verdict on the median of the rounds' ratios, at most or at least `bound`. */
    const goal = (
      text: string,
      ratio: ReturnType<typeof ratios>,
      bound: { atMost: number } | { atLeast: number },
    ): void => {
      const limit = "atMost" in bound ? bound.atMost : bound.atLeast;
      const met = (value: number) => ("atMost" in bound ? value <= limit : value >= limit);
      const figure = ratio
        ? `${figureBeside(ratio.median, limit)}×, median of rounds ${ratio.each.map((value) => figureBeside(value, limit)).join(", ")}`
        : "no figure";
      say(
        `goal ${text}: ${ratio === undefined ? "not met (not measured)" : met(ratio.median) ? "met" : "not met"} (${figure})`,
      );
    };
    goal(
      "our p50 ≤ 0.35× the reference's",
      ratios((round) => round.ours && round.ours.p50 / round.ref.p50),
      { atMost: 0.35 },
    );
    goal(
      "our throughput ≥ 3× the reference's",
      ratios((round) => round.ours && round.ours.perSecond / round.ref.perSecond),
      { atLeast: 3 },
    );
    goal(
      "our p50 ≤ 1.3× the chain floor's",
      ratios((round) => round.ours && round.ours.p50 / round.floor.p50),
      { atMost: 1.3 },
    );
    goal(
      "with a policy on every agent, p50 ≤ 1.1× (d)'s",
      ratios((round) => round.governed && round.agents && round.governed.p50 / round.agents.p50),
      { atMost: 1.1 },
    );
    goal(
      "with a policy on every agent, throughput ≥ 0.9× (d)'s",
      ratios((round) => round.governed && round.agents && round.governed.perSecond / round.agents.perSecond),
      { atLeast: 0.9 },
    );
    goal(
      "with receipts and payment ids (g), p50 ≤ 1.1× (f)'s without",
      ratios((round) => round.identified && round.plain && round.identified.p50 / round.plain.p50),
      { atMost: 1.1 },
    );
    goal(
      "with receipts and payment ids (g), throughput ≥ 0.9× (f)'s without",
      ratios(
        (round) => round.identified && round.plain && round.identified.perSecond / round.plain.perSecond,
      ),
      { atLeast: 0.9 },
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
