/**
 * `npm run bench:bounded`: what a new key costs the bounded sets a node keeps in memory, once a
 * flood from many addresses (or many tokens, or many payments) has filled them, against the same
 * structure with room (docs/performance.md, "Floods"). Each of these drops its least recent key
 * for each new one at capacity, on the thread that serves requests: the pre-auth and per-agent
 * limiters and the registration's early limiter (SlidingWindowLimiter, 100,000 keys), the recent
 * authentications (50,000 pairs), the lockout allowance (20,000 ids, the edge keeps one too), the
 * edge's remembered refusals (10,000 keys) and the enclave's recent settlements (100,000). Also
 * the console's read of the limiter's 200 newest keys (`snapshot`) with 100,000 keys against 10,000.
 * Beside them, for comparison, a plain Map that drops its first key through `keys().next()` at
 * 100,000 keys, as these structures did before. Goal: each at capacity within 2× of itself with
 * room, the median of ROUNDS rounds.
 */
import { RememberedRefusals } from "../edge-worker/remembered-refusals.ts";
import { RecentSettlements } from "../enclave/recent-settlements.ts";
import { RecentAuthentications } from "../origin/auth/recent-authentications.ts";
import { LockoutAllowance } from "../shared/lockout-allowance.ts";
import { SlidingWindowLimiter } from "../shared/rate-limiter.ts";
import { startStealMeter } from "../testing/measure/cpu-steal.ts";
import { figureBeside } from "../testing/measure/goal-figure.ts";
import { median } from "../testing/measure/stats.ts";

const ROUNDS = 3;
const GOAL_RATIO = 2;

/**
 * One structure: how to make it, its capacity, and how to add the i-th new key to it;
 * `comparison`: printed for reference, with no goal.
 */
type Subject = { name: string; capacity: number; make: () => (i: number) => void; comparison?: true };

const FAR_FUTURE_SECONDS = BigInt(Math.floor(Date.now() / 1000) + 86_400);

const subjects: Subject[] = [
  {
    name: "SlidingWindowLimiter (pre-auth, per agent, early registration)",
    capacity: 100_000,
    make: () => {
      const limiter = new SlidingWindowLimiter({ limit: 60, windowSeconds: 60 });
      return (i) => limiter.record(address(i));
    },
  },
  {
    name: "RecentAuthentications",
    capacity: 50_000,
    make: () => {
      const recent = new RecentAuthentications();
      return (i) => recent.remember(address(i), `token-${i}`);
    },
  },
  {
    name: "LockoutAllowance",
    capacity: 20_000,
    make: () => {
      const allowance = new LockoutAllowance();
      return (i) => allowance.failed(address(i >> 4), `token-${i}`);
    },
  },
  {
    name: "edge RememberedRefusals",
    capacity: 10_000,
    make: () => {
      const refusals = new RememberedRefusals<number>(10_000);
      return (i) => refusals.remember(address(i), 60, i);
    },
  },
  {
    name: "enclave RecentSettlements",
    capacity: 100_000,
    make: () => {
      const settlements = new RecentSettlements();
      const now = BigInt(Math.floor(Date.now() / 1000));
      const settlement = { payer: "0x01", payee: "0x02", valueUnits: 1n, validBefore: FAR_FUTURE_SECONDS };
      return (i) => settlements.record(`0x${i.toString(16).padStart(64, "0")}`, settlement, now);
    },
  },
  {
    name: "for comparison: a Map dropping its first key by keys().next()",
    capacity: 100_000,
    comparison: true,
    make: () => {
      const map = new Map<string, number>();
      return (i) => {
        if (map.size >= 100_000) map.delete(map.keys().next().value!);
        map.set(address(i), i);
      };
    },
  },
];

const verdict = (ratio: number): string => (ratio <= GOAL_RATIO ? "met" : "not met");

/** Distinct IPv4-like strings, as the limiters key clients. */
function address(i: number): string {
  return `${(i >>> 24) & 255}.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`;
}

/** Nanoseconds a new key, over `count` new keys from `from`. */
function timeNewKeys(add: (i: number) => void, from: number, count: number): number {
  const start = process.hrtime.bigint();
  for (let i = from; i < from + count; i++) add(i);
  return Number(process.hrtime.bigint() - start) / count;
}

/** With room: half full, then a quarter of the capacity more. At capacity: full, twice over, then as many. */
function measure(subject: Subject): { room: number; full: number } {
  const quarter = subject.capacity / 4;
  const roomy = subject.make();
  for (let i = 0; i < subject.capacity / 2; i++) roomy(i);
  const room = timeNewKeys(roomy, subject.capacity / 2, quarter);
  const full = subject.make();
  for (let i = 0; i < subject.capacity * 3; i++) full(i);
  return { room, full: timeNewKeys(full, subject.capacity * 3, quarter) };
}

/** Microseconds a `snapshot(200)` of a limiter holding `keys` keys, each with an event in the window. */
function timeSnapshot(keys: number): number {
  const limiter = new SlidingWindowLimiter({ limit: 60, windowSeconds: 60 });
  for (let i = 0; i < keys; i++) limiter.record(address(i));
  // A read takes microseconds, and the collector's pass after the fill can land in any of them:
  // the median of many short batches leaves out the batch it lands in, where one long batch's
  // mean carried it (a run read 46 µs a read against 7 in the runs beside it).
  const batches = 21;
  const readsPerBatch = 20;
  const perRead: number[] = [];
  for (let batch = 0; batch < batches; batch++) {
    const start = process.hrtime.bigint();
    for (let read = 0; read < readsPerBatch; read++) limiter.snapshot(200);
    perRead.push(Number(process.hrtime.bigint() - start) / readsPerBatch / 1_000);
  }
  return median(perRead);
}

async function main(): Promise<void> {
  console.log(`bench:bounded — node ${process.version}, ${ROUNDS} rounds, the median of each`);
  const steal = await startStealMeter();
  const rounds = new Map<string, { room: number[]; full: number[] }>();
  const snapshots: { fewer: number[]; many: number[] } = { fewer: [], many: [] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const subject of subjects) {
      const { room, full } = measure(subject);
      const seen = rounds.get(subject.name) ?? { room: [], full: [] };
      seen.room.push(room);
      seen.full.push(full);
      rounds.set(subject.name, seen);
    }
    snapshots.fewer.push(timeSnapshot(10_000));
    snapshots.many.push(timeSnapshot(100_000));
  }
  const verdicts: string[] = [];
  for (const subject of subjects) {
    const { room, full } = rounds.get(subject.name)!;
    const ratio = median(full) / median(room);
    const goal = subject.comparison ? "" : `; goal ≤ ${GOAL_RATIO}×: ${verdict(ratio)}`;
    console.log(
      `${subject.name}, ${subject.capacity.toLocaleString("en")} keys: a new key ${(median(room) / 1000).toFixed(2)} µs with room, ` +
        `${(median(full) / 1000).toFixed(2)} µs at capacity (${figureBeside(ratio, GOAL_RATIO)}×)${goal}`,
    );
    if (!subject.comparison) verdicts.push(`${subject.name}: ${verdict(ratio)}`);
  }
  const snapshotRatio = median(snapshots.many) / median(snapshots.fewer);
  console.log(
    `SlidingWindowLimiter.snapshot(200): ${median(snapshots.fewer).toFixed(1)} µs with 10,000 keys, ` +
      `${median(snapshots.many).toFixed(1)} µs with 100,000 (${figureBeside(snapshotRatio, GOAL_RATIO)}×); goal ≤ ${GOAL_RATIO}×: ${verdict(snapshotRatio)}`,
  );
  verdicts.push(`SlidingWindowLimiter.snapshot: ${verdict(snapshotRatio)}`);
  console.log(await steal());
  for (const verdict of verdicts) console.log(verdict);
}

await main();
