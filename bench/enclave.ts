/**
 * `npm run bench:enclave` (docs/performance.md, "The enclave"): signing operations per second through the
 * real enclave process over its socket, with 1 and with 32 requests in flight, beside the same signing
 * done in this process with the same code (the digests of shared/eip712.ts and shared/identity-proof.ts,
 * signed by shared/secp256k1.ts: libsecp256k1 where its binding loads, as in the enclave),
 * in one run on one machine, with the CPU each process spent per operation. Goal: at 32 in flight, at
 * least 85 % of the in-process rate. The machine's speed drifts between seconds, so the in-process
 * and 32-in-flight figures are taken in rounds, in turn, and the goal is judged on the median of the
 * rounds' ratios.
 */
import { randomBytes } from "node:crypto";
import { availableParallelism } from "node:os";
import type { Address } from "viem";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSocketSignerClient } from "../origin/signer/socket-client.ts";
import type { CapabilityProvider, KeyPublicInfo, SignerClient } from "../origin/signer/types.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import { transferWithAuthorizationDigest } from "../shared/eip712.ts";
import { fromHex, type Hex } from "../shared/hex.ts";
import { buildIdentityProofPreimage, identityProofDigest } from "../shared/identity-proof.ts";
import { addressOfPublicKey, publicKeyOf, randomPrivateKey, signDigest } from "../shared/secp256k1.ts";
import { createEnclaveFixture } from "../testing/enclave-process.ts";
import { startStealMeter } from "../testing/measure/cpu-steal.ts";
import { figureBeside } from "../testing/measure/goal-figure.ts";
import { cpuMsOf, mainThreadCpuMs } from "../testing/measure/proc-cpu.ts";
import { median } from "../testing/measure/stats.ts";

const PAY_TO: Address = "0x2222222222222222222222222222222222222222";
const AMOUNT = 10_000n;
const WARMUP_MS = 500;
const MEASURE_MS = Number(process.env.BENCH_MS ?? 3_000);
/** In-process and 32 in flight take turns, each measured this many times for MEASURE_MS / ROUNDS. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** How many keys have signed today when the x402 rate is measured again (BENCH_ACTIVE_KEYS=0: skip). */
const ACTIVE_KEY_LEVELS = (process.env.BENCH_ACTIVE_KEYS ?? "1000,10000")
  .split(",")
  .map(Number)
  .filter((level) => level > 0);
/** generate_keys makes at most this many in one batch (MAX_BATCH_KEYS). */
const KEYS_PER_BATCH = 1000;

type Op = "sign_x402_authorization" | "prove_identity";
/**
 * CPU ms per operation of this process (the client, or the in-process signer), of the enclave and
 * of the enclave's main thread alone (its event loop: the one thread every request goes through).
 */
type CpuPerOp = { bench: number; enclave: number | null; enclaveMain: number | null };
type Figure = { op: Op; mode: string; ops: number; seconds: number; rate: number; cpu: CpuPerOp };
/** The 32-in-flight rate against the in-process rate measured just before it, for each round. */
type RoundRatios = Map<Op, number[]>;

/** One figure of several windows of the same measure: their operations, time and CPU together. */
function combine(parts: Figure[]): Figure {
  const ops = parts.reduce((sum, part) => sum + part.ops, 0);
  const seconds = parts.reduce((sum, part) => sum + part.seconds, 0);
  const perOp = (pick: (cpu: CpuPerOp) => number | null): number | null =>
    parts.some((part) => pick(part.cpu) === null)
      ? null
      : parts.reduce((sum, part) => sum + pick(part.cpu)! * part.ops, 0) / ops;
  return {
    ...parts[0]!,
    ops,
    seconds,
    rate: ops / seconds,
    cpu: {
      bench: perOp((cpu) => cpu.bench)!,
      enclave: perOp((cpu) => cpu.enclave),
      enclaveMain: perOp((cpu) => cpu.enclaveMain),
    },
  };
}

/** Reads both processes' CPU now; the result, called after the window, gives CPU ms per op. */
async function cpuMeter(enclavePid: number | undefined): Promise<(ops: number) => Promise<CpuPerOp>> {
  const read = (pid: number | undefined): Promise<number> =>
    pid === undefined ? Promise.resolve(Number.NaN) : cpuMsOf(`/proc/${pid}/stat`);
  const [bench, enclave, enclaveMain] = [
    await read(process.pid),
    await read(enclavePid),
    await mainThreadCpuMs(enclavePid),
  ];
  return async (ops) => ({
    bench: ((await read(process.pid)) - bench) / ops,
    enclave: enclavePid === undefined ? null : ((await read(enclavePid)) - enclave) / ops,
    enclaveMain: enclavePid === undefined ? null : ((await mainThreadCpuMs(enclavePid)) - enclaveMain) / ops,
  });
}

const nonce = (): Hex => `0x${randomBytes(32).toString("hex")}`;

/** Runs `once` for `ms` with `concurrency` loops in flight; returns completed operations and time. */
async function measure(
  concurrency: number,
  ms: number,
  once: () => Promise<void>,
): Promise<{ ops: number; seconds: number }> {
  let ops = 0;
  const started = performance.now();
  const deadline = started + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        await once();
        ops++;
      }
    }),
  );
  return { ops, seconds: (performance.now() - started) / 1000 };
}

/** The same signing the enclave does, in this process (synchronous, like the enclave's handler). */
function inProcess(op: Op, ms: number): { ops: number; seconds: number } {
  const privateKey = randomPrivateKey();
  const publicKey = publicKeyOf(privateKey);
  const address = addressOfPublicKey(publicKey);
  const keyRef = randomBytes(32).toString("hex");
  const now = BigInt(Math.floor(Date.now() / 1000));
  let ops = 0;
  const started = performance.now();
  const deadline = started + ms;
  while (performance.now() < deadline) {
    const digest =
      op === "sign_x402_authorization"
        ? fromHex(
            transferWithAuthorizationDigest({
              from: address,
              to: PAY_TO,
              value: AMOUNT,
              validAfter: 0n,
              validBefore: now + 120n,
              nonce: nonce(),
            }),
          )
        : identityProofDigest(
            buildIdentityProofPreimage({
              chainId: CHAIN_ID,
              envId: "bench",
              keyRef,
              publicKey,
              address,
              verifierNonce: nonce(),
            }),
          );
    signDigest(digest, privateKey);
    ops++;
  }
  return { ops, seconds: (performance.now() - started) / 1000 };
}

function overSocket(client: SignerClient, op: Op, keys: KeyPublicInfo[]): () => Promise<void> {
  let next = 0;
  return async () => {
    const { keyRef, address } = keys[next++ % keys.length]!;
    const result =
      op === "sign_x402_authorization"
        ? await client.signX402Authorization({
            keyRef,
            from: address,
            to: PAY_TO,
            valueUnits: AMOUNT,
            validAfter: 0n,
            validBefore: BigInt(Math.floor(Date.now() / 1000) + 120),
            nonce: nonce(),
          })
        : await client.proveIdentity({ keyRef, verifierNonce: nonce() });
    if (!result.ok) throw new Error(`${op} failed: ${result.error.code} ${result.error.reason}`);
  };
}

async function main(): Promise<void> {
  process.stdout.write("starting the enclave process on a temporary socket...\n");
  // BENCH_ENCLAVE_NODE_ARGS="--cpu-prof --cpu-prof-dir=prof" profiles the enclave (docs/performance.md).
  const nodeArgs = process.env.BENCH_ENCLAVE_NODE_ARGS?.split(" ").filter(Boolean);
  const fixture = await createEnclaveFixture({ envId: "bench", nodeArgs });
  const client = createSocketSignerClient({ socketPath: fixture.socketPath, requestTimeoutMs: 30_000 });
  try {
    const admin = createCapabilityMinter({ authority: fixture.adminSecret, envId: fixture.envId, client });
    const batch = await client.generateKeys(
      { namespace: "agent-transfer", count: 32, batchId: "bench" },
      admin,
    );
    if (!batch.ok) throw new Error(`generate_keys failed: ${batch.error.code}`);
    const policy = await client.configurePolicy(
      {
        perTxLimitUnits: 0n,
        dailyLimitUnits: 0n,
        recipientAllowlist: null,
        x402AmountUnits: AMOUNT,
        x402PayTo: PAY_TO,
        x402MaxTimeoutSeconds: 180,
        operatorPool: "0x00000000000000000000000000000000000000aa",
        feeCeilingWei: 0n,
        x402ValidityMarginSeconds: 6,
        // The bench signs as fast as the enclave can; the sealed daily count must not stop it.
        x402DailyLimit: Number.MAX_SAFE_INTEGER,
        settlerDailyFeeUnits: 0n,
      },
      createCapabilityMinter({ authority: fixture.policySecret, envId: fixture.envId, client }),
    );
    if (!policy.ok) throw new Error(`configure_policy failed: ${policy.error.code}`);
    const keys = batch.value.keys;

    const steal = await startStealMeter();
    const figures: Figure[] = [];
    const roundRatios: RoundRatios = new Map();
    for (const op of ["sign_x402_authorization", "prove_identity"] as const) {
      const local = async (ms: number): Promise<Figure> => {
        const localCpu = await cpuMeter(undefined);
        const run = inProcess(op, ms);
        return { op, mode: "in-process", ...run, rate: run.ops / run.seconds, cpu: await localCpu(run.ops) };
      };
      const once = overSocket(client, op, keys);
      const remote = async (inFlight: number, ms: number): Promise<Figure> => {
        const remoteCpu = await cpuMeter(fixture.pid());
        const run = await measure(inFlight, ms, once);
        const cpu = await remoteCpu(run.ops);
        return { op, mode: `socket, ${inFlight} in flight`, ...run, rate: run.ops / run.seconds, cpu };
      };
      inProcess(op, WARMUP_MS);
      await measure(1, WARMUP_MS, once);
      const alone = await remote(1, MEASURE_MS);
      await measure(32, WARMUP_MS, once);
      const locals: Figure[] = [];
      const at32: Figure[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        locals.push(await local(MEASURE_MS / ROUNDS));
        at32.push(await remote(32, MEASURE_MS / ROUNDS));
      }
      figures.push(combine(locals), alone, combine(at32));
      roundRatios.set(
        op,
        at32.map((figure, round) => figure.rate / locals[round]!.rate),
      );
    }
    report(figures, roundRatios);
    const at32 = figures.find(
      (figure) => figure.op === "sign_x402_authorization" && figure.mode === "socket, 32 in flight",
    )!;
    await reportStateGrowth(client, admin, keys, fixture.pid(), at32.rate);
    process.stdout.write(`${await steal()}\n`);
  } finally {
    await client.close();
    await fixture.dispose();
  }
}

/**
 * The sealed state holds each key's x402 count for the day, and every group commit encodes and
 * seals all of it (docs/performance.md, "The enclave"): keys are made active, one signature each,
 * and the bench's own keys' rate at 32 in flight is measured again at each level.
 */
async function reportStateGrowth(
  client: SignerClient,
  admin: CapabilityProvider,
  benchKeys: KeyPublicInfo[],
  enclavePid: number | undefined,
  baseline: number,
): Promise<void> {
  if (ACTIVE_KEY_LEVELS.length === 0) return;
  const lines = [
    "\nsign_x402_authorization, 32 in flight, with more keys active today (each signed once; the sealed state holds its count)",
  ];
  const active: KeyPublicInfo[] = [];
  for (const level of ACTIVE_KEY_LEVELS) {
    const fresh: KeyPublicInfo[] = [];
    while (active.length + fresh.length < level) {
      const count = Math.min(KEYS_PER_BATCH, level - active.length - fresh.length);
      const made = await client.generateKeys(
        { namespace: "agent-transfer", count, batchId: `active-${active.length + fresh.length}` },
        admin,
      );
      if (!made.ok) throw new Error(`generate_keys failed: ${made.error.code}`);
      fresh.push(...made.value.keys);
    }
    const activate = overSocket(client, "sign_x402_authorization", fresh);
    let activated = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (activated++ < fresh.length) await activate();
      }),
    );
    active.push(...fresh);
    const once = overSocket(client, "sign_x402_authorization", benchKeys);
    await measure(32, WARMUP_MS, once);
    const cpu = await cpuMeter(enclavePid);
    const run = await measure(32, MEASURE_MS, once);
    const perOp = await cpu(run.ops);
    const rate = run.ops / run.seconds;
    lines.push(
      `  ${String(active.length + benchKeys.length).padStart(6)} keys active ${rate.toFixed(0).padStart(7)} ops/s  (${((100 * rate) / baseline).toFixed(0)}% of the rate with the bench's ${benchKeys.length})`,
      `  ${"".padEnd(19)} CPU ms per op: enclave ${perOp.enclave?.toFixed(3)} (main thread ${perOp.enclaveMain?.toFixed(3)})`,
    );
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}

/**
 * Whether a socket figure waited for CPU or for something else (the durable write): how busy the
 * enclave's main thread was, and the rate its CPU per op would allow with every core busy (shared
 * by the client and the enclave) and the main thread never idle.
 */
function cpuCeiling(row: Figure, inProcessRate: number): string | undefined {
  const { bench, enclave, enclaveMain } = row.cpu;
  if (enclave === null || enclaveMain === null) return undefined;
  const cores = availableParallelism();
  const ceiling = Math.min((1000 * cores) / (bench + enclave), 1000 / enclaveMain);
  const busyMsPerSecond = row.rate * enclaveMain;
  return (
    `main thread busy ${(busyMsPerSecond / 10).toFixed(0)}% of the time; by CPU alone, ` +
    `${cores} cores would allow ${ceiling.toFixed(0)} ops/s (${((100 * ceiling) / inProcessRate).toFixed(0)}% of in-process)`
  );
}

function report(figures: Figure[], roundRatios: RoundRatios): void {
  const lines = [
    `node ${process.version}, ${process.platform}/${process.arch}, ${MEASURE_MS} ms per figure` +
      ` (in-process and 32 in flight in ${ROUNDS} rounds taken in turn)`,
  ];
  for (const op of ["sign_x402_authorization", "prove_identity"] as const) {
    const rows = figures.filter((figure) => figure.op === op);
    const local = rows.find((figure) => figure.mode === "in-process")!;
    lines.push(`\n${op}`);
    for (const row of rows) {
      const ratio = row === local ? "" : `  (${((100 * row.rate) / local.rate).toFixed(0)}% of in-process)`;
      const enclaveCpu =
        row.cpu.enclave === null || row.cpu.enclaveMain === null
          ? ""
          : `, enclave ${row.cpu.enclave.toFixed(3)} (main thread ${row.cpu.enclaveMain.toFixed(3)})`;
      lines.push(
        `  ${row.mode.padEnd(24)} ${row.rate.toFixed(0).padStart(7)} ops/s  [${row.ops} ops]${ratio}`,
        `  ${"".padEnd(24)} CPU ms per op: this process ${row.cpu.bench.toFixed(3)}${enclaveCpu}`,
      );
      const ceiling = row.mode === "socket, 32 in flight" ? cpuCeiling(row, local.rate) : undefined;
      if (ceiling) lines.push(`  ${"".padEnd(24)} ${ceiling}`);
    }
    const ratios = roundRatios.get(op)!;
    const verdict = median(ratios);
    const percent = (ratio: number): string => `${figureBeside(100 * ratio, 85, 0)}%`;
    lines.push(
      `  32 in flight against in-process, by round: ${ratios.map(percent).join(", ")}`,
      `  goal (32 in flight >= 85% of in-process): ${verdict >= 0.85 ? "met" : "NOT met"} (${percent(verdict)}, median of rounds)`,
    );
  }
  process.stdout.write(`${lines.join("\n")}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench-enclave: ${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
