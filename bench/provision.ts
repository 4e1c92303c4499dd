/**
 * `npm run bench:provision`: identities provisioned per second with 1 and 32 concurrent callers,
 * and keys made ready per second by the refill worker (generate → backup → verify → free), each
 * beside a baseline from the same run: a bare one-row transaction on the same pool, and the
 * enclave's generate_keys alone. Real embedded Postgres, real enclave process; loopback only.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import pino from "pino";
import { postmasterPid } from "../dev/local-stack.ts";
import { connectDatabase } from "../origin/db/client.ts";
import { startEmbeddedPostgres } from "../origin/db/embedded.ts";
import { migrateDatabase } from "../origin/db/migrate.ts";
import { provisionIdentity } from "../origin/keypool/provision.ts";
import { refillOnce } from "../origin/keypool/refill.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import { startEnclaveProcess } from "../testing/enclave-process.ts";
import { freePort } from "../testing/free-port.ts";
import { startStealMeter } from "../testing/measure/cpu-steal.ts";
import { figureBeside } from "../testing/measure/goal-figure.ts";
import { cpuDelta, mainThreadCpuMs, treeCpuSeconds } from "../testing/measure/proc-cpu.ts";
import { median } from "../testing/measure/stats.ts";

const KEYS = Number(process.env.BENCH_KEYS ?? 1200);
const BATCH = Number(process.env.BENCH_BATCH ?? 100);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const rate = (count: number, ms: number): string => `${((count * 1000) / ms).toFixed(0)}/s`;

async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - started };
}

/**
 * CPU each process spends while `fn` runs: this one (the refill's origin side), the enclave, its
 * main thread alone, and Postgres (its connections' processes included).
 */
async function withCpu<T>(
  pids: { enclave: number | undefined; postgres: number | undefined },
  fn: () => Promise<T>,
): Promise<{ value: T; cpuMs: Record<string, number> }> {
  const roots = {
    origin: { pid: process.pid, tree: false },
    enclave: { pid: pids.enclave, tree: false },
    postgres: { pid: pids.postgres, tree: true, reaped: true },
  };
  const [before, mainBefore] = [await treeCpuSeconds(roots), await mainThreadCpuMs(pids.enclave)];
  const value = await fn();
  const [after, mainAfter] = [await treeCpuSeconds(roots), await mainThreadCpuMs(pids.enclave)];
  const seconds = cpuDelta(before, after);
  const cpuMs = Object.fromEntries(Object.entries(seconds).map(([name, s]) => [name, s * 1000]));
  return { value, cpuMs: { ...cpuMs, "enclave main thread": mainAfter - mainBefore } };
}

const perKey = (cpuMs: Record<string, number>, keys: number): string =>
  Object.entries(cpuMs)
    .map(([name, ms]) => `${name} ${((ms * 1000) / keys).toFixed(0)}`)
    .join(", ");

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), "bench-provision-"));
  await chmod(dir, 0o755);
  const postgres = await startEmbeddedPostgres({ dir: path.join(dir, "pg"), port: await freePort() });
  const database = connectDatabase({ url: postgres.url, maxConnections: 16 });
  await migrateDatabase(database.db);
  // BENCH_ENCLAVE_NODE_ARGS="--cpu-prof --cpu-prof-dir=prof" profiles the enclave, as in bench:enclave.
  const nodeArgs = process.env.BENCH_ENCLAVE_NODE_ARGS?.split(" ").filter(Boolean);
  const enclave = await startEnclaveProcess({ envId: "bench", nodeArgs });
  const signer = createSignerClient({ endpoint: `unix://${enclave.socketPath}`, liveIdentityEnabled: true });
  const authorize = createCapabilityMinter({
    authority: enclave.adminSecret,
    envId: "bench",
    client: signer,
  });
  const logger = pino({ level: "silent" });
  try {
    say(`bench:provision — ${KEYS} keys in batches of ${BATCH}; node ${process.version}`);
    const steal = await startStealMeter();

    const generate = (round: string, keys: number) =>
      timed(async () => {
        for (let made = 0; made < keys; made += BATCH) {
          const result = await signer.generateKeys(
            { namespace: "agent-transfer", count: BATCH, batchId: `baseline-${round}-${made}` },
            authorize,
          );
          if (!result.ok) throw new Error(result.error.code);
        }
      });
    let target = 0;
    const refill = async (keys: number) => {
      target += keys;
      const run = await timed(() =>
        refillOnce(
          { db: database.db, signer, authorize, backupDir: path.join(dir, "backups"), logger },
          { target, batchSize: BATCH },
        ),
      );
      if (run.value.some((outcome) => !outcome.ok)) throw new Error("a refill batch failed");
      return run;
    };
    // Both paths once before either is timed: a new enclave process runs generate_keys at about half
    // its later rate for its first few hundred keys (its code not yet compiled hot), and timing
    // generate first and the refill after gave the refill that warm-up and the baseline none.
    const warmUpKeys = Math.ceil(KEYS / 2 / BATCH) * BATCH;
    const coldGenerate = await generate("cold", warmUpKeys);
    const coldRefill = await refill(warmUpKeys);
    say(
      `  warm-up: generate_keys ${rate(warmUpKeys, coldGenerate.ms)}, refill ${rate(warmUpKeys, coldRefill.ms)} keys (not counted)`,
    );
    // Rounds of the baseline and the refill in turn, each of KEYS keys: one pair is a fraction of a
    // second, so the verdict is the median of the rounds' ratios.
    const pids = { enclave: enclave.pid(), postgres: await postmasterPid(path.join(dir, "pg")) };
    const shares: number[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const { value: generateOnly, cpuMs: generateCpu } = await withCpu(pids, () =>
        generate(`round-${round}`, KEYS),
      );
      const { value: ready, cpuMs: readyCpu } = await withCpu(pids, () => refill(KEYS));
      const share = generateOnly.ms / ready.ms;
      shares.push(share);
      say(`round ${round}: keys made ready ${share.toFixed(2)}× the enclave's generate alone`);
      say(`  refill worker: ${rate(KEYS, ready.ms)} keys made ready (${KEYS} in ${ready.ms.toFixed(0)} ms)`);
      say(`    CPU µs per key: ${perKey(readyCpu, KEYS)}`);
      say(`  baseline, enclave generate_keys alone: ${rate(KEYS, generateOnly.ms)} keys`);
      say(`    CPU µs per key: ${perKey(generateCpu, KEYS)}`);
    }
    const readyShare = median(shares);
    const readyGoal = readyShare >= 0.8 ? "met" : "NOT met";

    const bare = await timed(async () => {
      for (let i = 0; i < 300; i++) {
        await database.db.transaction(async (tx) => {
          await tx.execute(sql`select 1 from registration_policy where id = 1 for update`);
        });
      }
    });
    const sequential = 300;
    const one = await timed(async () => {
      for (let i = 0; i < sequential; i++) {
        const result = await provisionIdentity(database.db, { capabilities: ["read"], origin: "operator" });
        if (!result.ok) throw new Error(result.error.code);
      }
    });
    const concurrent = KEYS - sequential;
    let next = 0;
    const many = await timed(() =>
      Promise.all(
        Array.from({ length: 32 }, async () => {
          while (next++ < concurrent) {
            const result = await provisionIdentity(database.db, {
              capabilities: ["read"],
              origin: "operator",
            });
            if (!result.ok) throw new Error(result.error.code);
          }
        }),
      ),
    );
    say(`provisionIdentity, 1 caller:   ${rate(sequential, one.ms)} identities`);
    say(`provisionIdentity, 32 callers: ${rate(concurrent, many.ms)} identities (pool of 16 connections)`);
    say(`  baseline, bare one-row locking transaction, 1 caller: ${rate(300, bare.ms)}`);
    say(await steal());
    const perSecond = (concurrent * 1000) / many.ms;
    say(
      `goal identities/s with 32 callers ≥ 1,000: ${perSecond >= 1_000 ? "met" : "NOT met"} (${figureBeside(perSecond, 1_000, 0)}/s)`,
    );
    say(
      `goal keys made ready ≥ 0.8× the enclave's generate alone: ${readyGoal} (${figureBeside(readyShare, 0.8)}×, median of ${ROUNDS} rounds)`,
    );
  } finally {
    await signer.close();
    await enclave.dispose();
    await database.close();
    await postgres.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
