/**
 * `npm run soak -- --minutes N`: the whole local stack (as `npm start` runs it, on a fresh data
 * folder and free ports) under mixed load through the edge for N minutes, with a live progress
 * line; then memory per process at start, after warm-up and at the end, requests by route kind and
 * status, the limits seen holding, money conservation to the wei, and one line per goal.
 *
 * The mix (soak/kinds.ts): reads, rpc calls and batches, transfers between the soak's
 * agents, faucet payouts, public registrations from varied public addresses, bad tokens, x402
 * payments by funded viem accounts with the official client (soak/x402.ts); beside it run once
 * the transfer-limit probes and a burst past the per-agent rate limit (probes.ts).
 * The machine is shared, so the figures are noisy; the CPU steal of the run is printed with them.
 */

import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { LOCAL_POLICY, LOCAL_X402_AMOUNT_UNITS } from "../dev/local-policy.ts";
import { createLocalStack, postmasterPid } from "../dev/local-stack.ts";
import { DEV_OPERATOR_POOL_ADDRESS } from "../devnet/constants.ts";
import { connectDatabase, queryRows } from "../origin/db/client.ts";
import { changeRegistrationSettings } from "../origin/registration/settings.ts";
import { errorMessage } from "../shared/error-message.ts";
import { asksForHelp } from "../shared/no-arguments.ts";
import { sleep } from "../shared/sleep.ts";
import { freePort } from "../testing/free-port.ts";
import { startStealMeter } from "../testing/measure/cpu-steal.ts";
import { childPidsNamed, type MemoryRoot, residentBytes } from "../testing/measure/proc-memory.ts";
import { fundSoakAgents, provisionSoakAgents, type SoakAgents } from "./agents.ts";
import { parseSoakArgs, SOAK_USAGE } from "./args.ts";
import { createEdgeClient } from "./edge-client.ts";
import { BASE_MIX, pickKind, type SoakContext } from "./kinds.ts";
import { LimitObservations, limitLines, REGISTRATION_NETWORK_DAILY } from "./limits.ts";
import { checkMoney } from "./money.ts";
import { probeRequestRate, probeTransferLimits } from "./probes.ts";
import { type MemoryRow, type MemorySample, reportLines } from "./report.ts";
import { progressLine, Tally } from "./tally.ts";
import { makeAccountPayers, PaymentObservations, settledOnceLine } from "./x402.ts";

const BASE_PATH = "/77";
const ENV_ID = "local-dev";
/** The local stack's faucet cooldown (dev/local-stack.ts). */
const FAUCET_COOLDOWN_MS = 60_000;
/** How often the report's memory timeline samples every process. */
const MEMORY_TIMELINE_MS = 30_000;

/** Registrations the mix starts in the run, if it runs at its rate. */
function expectedRegistrations(args: { rate: number; loadMs: number }): number {
  const total = BASE_MIX.reduce((sum, kind) => sum + kind.weight, 0);
  const share =
    BASE_MIX.filter((kind) => kind.name === "register").reduce((sum, kind) => sum + kind.weight, 0) / total;
  return Math.ceil(args.rate * share * (args.loadMs / 1000));
}

const say = (line: string): void => {
  process.stdout.write(`[soak] ${line}\n`);
};

async function main(): Promise<number> {
  const args = parseSoakArgs(process.argv.slice(2));
  // The warm-up is load like the rest, before the measured minutes.
  const loadMs = args.warmUpMs + args.durationMs;
  const dataDir = await mkdtemp(path.join(tmpdir(), "soak-"));
  // Postgres runs as its own user when this runs as root: it must be able to enter the folder.
  await chmod(dataDir, 0o755);
  const logFile = path.join(tmpdir(), `${path.basename(dataDir)}.log`);
  const log = createWriteStream(logFile);
  say(`stack output goes to ${logFile}`);

  let partExited: string | undefined;
  let agents: SoakAgents | undefined;
  const stack = createLocalStack({
    dataDir,
    originPort: await freePort(),
    devnetPort: await freePort(),
    edgePort: await freePort(),
    edgeDirectSocket: true,
    pgPort: await freePort(),
    basePath: BASE_PATH,
    envId: ENV_ID,
    say: (line) => say(`stack  ${line}`),
    onPartLine: (line) => log.write(`${line}\n`),
    originEnv: {
      LOG_LEVEL: process.env.LOG_LEVEL ?? "warn",
      // Keys for the registrations the run can make (at most the day's network quota), plus the
      // reserve and the agents, made ahead in bigger batches: the run should meet the quota, not
      // the key reserve. A short run keeps the stack's usual pool, so it starts as fast.
      KEY_POOL_TARGET: String(
        20 + Math.min(REGISTRATION_NETWORK_DAILY, expectedRegistrations({ rate: args.rate, loadMs })),
      ),
      KEY_POOL_BATCH_SIZE: "20",
    },
    beforeDrill: async (db) => {
      say(`agents ${args.agents} ordinary and 2 for the limit probes, provisioned before the stack's drill…`);
      agents = await provisionSoakAgents(db, args.agents);
    },
    onPartExit: (name, code) => {
      partExited = `${name} exited (${code})`;
    },
  });
  let finishing: Promise<void> | undefined;
  /** Stops the stack and removes its data folder (unless --keep-data); once, however it ends. */
  const finish = (): Promise<void> => {
    finishing ??= (async () => {
      await stack.stop();
      log.end();
      if (!args.keepData) await rm(dataDir, { recursive: true, force: true });
      else say(`data folder kept: ${dataDir}`);
    })();
    return finishing;
  };
  // Ctrl-C (or SIGTERM) during the load ends the load, and the report covers what ran; at any
  // other moment, or a second time, it stops the stack and exits at once.
  let interrupted: NodeJS.Signals | undefined;
  let loading = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (loading && interrupted === undefined) {
      interrupted = signal;
      say(`${signal}: ending the load now; the report follows (${signal} again stops at once)`);
      return;
    }
    interrupted ??= signal;
    say(`${signal}: stopping the stack`);
    void finish().then(() => process.exit(130));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  try {
    const ready = await stack.start();
    const database = connectDatabase({ url: ready.postgres.url, driver: "pg", maxConnections: 2 });
    try {
      const opened = await changeRegistrationSettings(database.db, {
        changes: { paused: "false" },
        reason: "soak: registration under load",
        source: "cli",
      });
      if (!opened.ok) throw new Error(`opening registration: ${opened.error.code}`);
      if (!agents) throw new Error("the stack started without provisioning the soak's agents");
      say("agents funded from the operator pool…");
      await fundSoakAgents(ready.devnetUrl, agents);

      say(`payers ${args.payers} viem accounts for x402, funded from the operator pool…`);
      const accountPayers = await makeAccountPayers({
        devnetUrl: ready.devnetUrl,
        count: args.payers,
        amountUnits: LOCAL_X402_AMOUNT_UNITS,
      });

      const edge = createEdgeClient({ workerUrl: ready.edge.directUrl!.origin, basePath: BASE_PATH });
      const [workerd] = await childPidsNamed("workerd");
      const roots: Record<string, MemoryRoot & { inGoal: boolean }> = {
        origin: { pid: ready.children.origin.process.pid, tree: false, inGoal: true },
        enclave: { pid: ready.children.enclave.process.pid, tree: false, inGoal: true },
        devnet: { pid: ready.children.devnet.process.pid, tree: false, inGoal: true },
        "edge (Miniflare workerd)": { pid: workerd, tree: false, inGoal: true },
        postgres: { pid: await postmasterPid(path.join(dataDir, "pg")), tree: true, inGoal: true },
        "soak driver (load)": { pid: process.pid, tree: false, inGoal: false },
      };
      const sampleMemory = (): Promise<Record<string, number | undefined>> => residentBytes(roots);

      const tally = new Tally();
      const limits = new LimitObservations();
      const payments = new PaymentObservations();
      const ctx: SoakContext = {
        edge,
        agents: agents.regular,
        registered: [],
        limits,
        accountPayers,
        payments,
      };
      const mix = BASE_MIX;
      const steal = await startStealMeter();

      const startMemory = await sampleMemory();
      const timeline: MemorySample[] = [{ atSeconds: 0, bytes: startMemory }];
      let warmMemory: Record<string, number | undefined> | undefined;
      const peak: Record<string, number | undefined> = { ...startMemory };
      const notePeak = (sample: Record<string, number | undefined>): void => {
        for (const [name, bytes] of Object.entries(sample)) {
          if (bytes !== undefined && bytes > (peak[name] ?? 0)) peak[name] = bytes;
        }
      };

      say(
        `load   ${(args.warmUpMs / 1000).toFixed(0)} s warm-up then ${(args.durationMs / 1000).toFixed(0)} s measured, at ${args.rate} req/s (at most ${args.concurrency} in flight); mix: ${mix.map((kind) => `${kind.name} ${kind.weight}`).join(", ")}`,
      );
      const started = performance.now();
      loading = true;
      const probes = Promise.all([
        probeTransferLimits({
          edge,
          agent: agents.dailyLimit,
          to: agents.regular[0]!.wallet,
          perTxUnits: LOCAL_POLICY.perTxLimitUnits,
          limits,
          record: (kind, answer) => tally.record(kind, answer),
        }),
        probeRequestRate({
          edge,
          agent: agents.burst,
          limits,
          record: (kind, answer) => tally.record(kind, answer),
        }),
      ]);

      const tty = process.stdout.isTTY === true;
      const progressEveryMs = tty ? 1_000 : 10_000;
      let nextProgress = started + progressEveryMs;
      let lastProgress = { at: started, total: 0 };
      let launched = 0;
      let inFlight = 0;
      const running = new Set<Promise<void>>();
      while (performance.now() - started < loadMs && partExited === undefined && interrupted === undefined) {
        const now = performance.now();
        const due = Math.floor(((now - started) / 1000) * args.rate) - launched;
        for (let i = 0; i < due && inFlight < args.concurrency; i++) {
          const kind = pickKind(mix);
          launched++;
          inFlight++;
          const request = kind
            .run(ctx)
            .then(
              (answer) => tally.record(kind.name, answer),
              (error: unknown) => tally.record(kind.name, { status: 0, body: String(error) }),
            )
            .finally(() => {
              inFlight--;
              running.delete(request);
            });
          running.add(request);
        }
        // Requests the concurrency cap held back are dropped, not owed: the rate is a ceiling.
        if (due > 0 && inFlight >= args.concurrency)
          launched = Math.floor(((now - started) / 1000) * args.rate);
        if (!warmMemory && now - started >= args.warmUpMs) {
          warmMemory = await sampleMemory();
          notePeak(warmMemory);
        }
        if (now - started >= timeline.length * MEMORY_TIMELINE_MS) {
          const sample = await sampleMemory();
          notePeak(sample);
          timeline.push({ atSeconds: timeline.length * (MEMORY_TIMELINE_MS / 1000), bytes: sample });
        }
        if (now >= nextProgress) {
          nextProgress = now + progressEveryMs;
          const sample = await sampleMemory();
          notePeak(sample);
          const rate = ((tally.total - lastProgress.total) * 1000) / (performance.now() - lastProgress.at);
          lastProgress = { at: performance.now(), total: tally.total };
          const line = progressLine({
            elapsedMs: performance.now() - started,
            durationMs: loadMs,
            requestsPerSecond: rate,
            tally,
            memory: sample,
          });
          process.stdout.write(tty ? `\r\x1b[2K${line}` : `${line}\n`);
        }
        await sleep(10);
      }
      await Promise.all(running);
      await probes;
      loading = false;
      const endMemory = await sampleMemory();
      notePeak(endMemory);
      if (tty) process.stdout.write("\n");
      const elapsedS = (performance.now() - started) / 1000;
      say(
        `load   done: ${tally.total} requests in ${elapsedS.toFixed(0)} s (${(tally.total / elapsedS).toFixed(1)} req/s)`,
      );
      say(await steal());
      if (partExited) throw new Error(`a part of the stack stopped during the run: ${partExited}`);

      const actions = await settleActions(database.db);
      const wallets = await queryRows<{ assigned_wallet: Address; origin: string }>(
        database.db,
        sql`select assigned_wallet, origin from agent_identities`,
      );
      const money = await checkMoney(ready.devnetUrl, {
        "genesis: operator pool": [DEV_OPERATOR_POOL_ADDRESS],
        "faucet treasury": ready.treasury ? [ready.treasury] : [],
        "operator-provisioned agent wallets": wallets
          .filter((w) => w.origin === "operator")
          .map((w) => w.assigned_wallet),
        "registered wallets": wallets.filter((w) => w.origin === "public").map((w) => w.assigned_wallet),
        "x402 payers (viem accounts)": accountPayers.map((payer) => payer.address),
        "x402 payee (demo payTo)": ready.x402PayTo ? [ready.x402PayTo] : [],
        "x402 settler (gas)": ready.settler ? [ready.settler] : [],
      });
      const settledOnce = await settledOnceLine({
        db: database.db,
        devnetUrl: ready.devnetUrl,
        payers: accountPayers.map((payer) => payer.address),
        seen: payments,
      });

      const memory: MemoryRow[] = Object.entries(roots).map(([name, root]) => ({
        name,
        start: startMemory[name],
        warm: warmMemory?.[name],
        end: endMemory[name],
        peak: peak[name],
        inGoal: root.inGoal,
      }));
      const lines = reportLines({
        memory,
        timeline: [...timeline, { atSeconds: Math.round(elapsedS), bytes: endMemory }],
        tally,
        limits: [
          ...limitLines(limits, {
            faucetCooldownMs: FAUCET_COOLDOWN_MS,
            transferPerTxUnits: LOCAL_POLICY.perTxLimitUnits,
            transferDailyUnits: LOCAL_POLICY.dailyLimitUnits,
          }),
          settledOnce,
        ],
        money,
        actions,
        // What ran: an interrupted load is shorter than asked.
        warmUpSeconds: Math.round(Math.min(args.warmUpMs / 1000, elapsedS)),
        measuredSeconds: Math.round(Math.max(0, elapsedS - args.warmUpMs / 1000)),
      });
      process.stdout.write(`${lines.join("\n")}\n`);
      if (interrupted) {
        say(
          `interrupted by ${interrupted} after ${elapsedS.toFixed(0)} s of load (of ${(loadMs / 1000).toFixed(0)} s): the report covers what ran`,
        );
        return 130;
      }
      return 0;
    } finally {
      await database.close();
    }
  } finally {
    await finish();
  }
}

/**
 * Set in the soak's driver: the process `npm run soak` starts in a session of its own, so that
 * Ctrl-C in the terminal reaches the driver alone (passed on by the command) and not the stack's
 * parts that run in the terminal's process group (the embedded Postgres, the edge's workerd),
 * which would stop under the load and leave nothing to report from.
 */
const DRIVER_ENV = "SOAK_DRIVER";

/** Runs the driver and exits with its code, passing Ctrl-C, SIGTERM and a hang-up on to it. */
function runDriver(): void {
  const argv = process.argv.slice(2);
  // Asked for as the other programs are (`npm run enclave -- --help`): an answer, not a failure.
  if (asksForHelp(argv)) {
    process.stdout.write(`${SOAK_USAGE}\n`);
    process.exit(0);
  }
  try {
    // A command line it cannot run is told here, before anything starts.
    parseSoakArgs(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`[soak] failed: ${errorMessage(error)}\n`);
    process.exit(1);
  }
  // The source's URL, from its bundle too (ops/lib/program-bundles.mjs).
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
  const driver = spawn(
    process.execPath,
    [path.join(root, "ops/lib/run-program.mjs"), "soak/main.ts", ...process.argv.slice(2)],
    { stdio: "inherit", detached: true, env: { ...process.env, [DRIVER_ENV]: "1" } },
  );
  const pass = (signal: NodeJS.Signals) => (): void => {
    driver.kill(signal);
  };
  process.on("SIGINT", pass("SIGINT"));
  process.on("SIGTERM", pass("SIGTERM"));
  process.on("SIGHUP", pass("SIGTERM"));
  driver.once("error", (error) => {
    process.stderr.write(`[soak] failed: could not start the driver: ${errorMessage(error)}\n`);
    process.exit(1);
  });
  driver.once("exit", (code, signal) => process.exit(code ?? (signal === "SIGINT" ? 130 : 1)));
}

/**
 * Waits (up to two minutes) until no agent action is in flight; returns the count per status (and
 * error code: a refused faucet or transfer is recorded as a failed action).
 */
async function settleActions(db: Parameters<typeof queryRows>[0]): Promise<Record<string, number>> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const rows = await queryRows<{ status: string; error_code: string | null; count: string }>(
      db,
      sql`select status, error_code, count(*)::text as count from agent_actions
          group by status, error_code order by status, error_code`,
    );
    const counts = Object.fromEntries(
      rows.map((row) => [
        row.error_code ? `${row.status} (${row.error_code})` : row.status,
        Number(row.count),
      ]),
    );
    const inFlight = rows
      .filter((row) => ["requested", "signed", "submitted"].includes(row.status))
      .reduce((sum, row) => sum + Number(row.count), 0);
    if (inFlight === 0 || Date.now() > deadline) return counts;
    await sleep(500);
  }
}

if (process.env[DRIVER_ENV] === undefined) runDriver();
else
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`[soak] failed: ${errorMessage(error)}\n`);
      process.exit(1);
    },
  );
