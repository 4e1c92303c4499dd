/**
 * A bench that grows (`BENCH_GROW=1 npm run bench:money` or `bench:x402`; docs/performance.md, "How
 * the cost grows"): the same operation at 1, 8, 32 and 128 concurrent clients (BENCH_GROW_LEVELS),
 * each level measured on its own, printing what one operation costs there: wall ms per operation
 * (the phase's length over what it completed), the p50 latency, and each process's CPU µs per
 * operation from /proc/<pid>/stat; then, from one level to the next, by how much each of those
 * grew. The clients are 4× (then 4×, 16×…) as many, so a throughput cost that holds still is
 * what scales; one that jumps between two levels is a step, and worth naming.
 */
import { type CpuRoot, cpuDelta, treeCpuSeconds } from "../testing/measure/proc-cpu.ts";
import { quantile } from "../testing/measure/stats.ts";

/** The concurrency levels of a growing run. */
export function growLevels(): number[] {
  const levels = (process.env.BENCH_GROW_LEVELS ?? "1,8,32,128")
    .split(",")
    .map((level) => Number(level.trim()))
    .filter((level) => Number.isInteger(level) && level > 0);
  if (levels.length === 0) throw new Error("BENCH_GROW_LEVELS names no level");
  return levels;
}

/** A level's name in a bench's output: its statements are described under it. */
export function levelName(clients: number): string {
  return `${clients} at once`;
}

/** Whether this run grows (BENCH_GROW set to anything but 0 or empty). */
export function growing(): boolean {
  const value = process.env.BENCH_GROW ?? "";
  return value !== "" && value !== "0";
}

/** What one level's phase did: operations completed, each one's latency in ms (ascending or not), its length. */
export type LevelRun = { count: number; latenciesMs: number[]; elapsedMs: number };

/** One level's cost per operation. */
export type LevelCost = {
  clients: number;
  count: number;
  perSecond: number;
  wallMsPerOp: number;
  p50Ms: number;
  /** CPU µs per operation, by process. */
  cpuUsPerOp: Record<string, number>;
};

/** Runs `run` at each level, measuring each process's CPU around it; the costs per operation. */
export async function measureLevels(
  levels: readonly number[],
  roots: Record<string, CpuRoot>,
  run: (clients: number) => Promise<LevelRun>,
  say: (line: string) => void,
): Promise<LevelCost[]> {
  const costs: LevelCost[] = [];
  for (const clients of levels) {
    const before = await treeCpuSeconds(roots);
    const result = await run(clients);
    const spent = cpuDelta(before, await treeCpuSeconds(roots));
    const count = Math.max(1, result.count);
    const sorted = [...result.latenciesMs].sort((a, b) => a - b);
    const cost: LevelCost = {
      clients,
      count: result.count,
      perSecond: result.count / (result.elapsedMs / 1000),
      wallMsPerOp: result.elapsedMs / count,
      p50Ms: quantile(sorted, 0.5),
      cpuUsPerOp: Object.fromEntries(
        Object.entries(spent).map(([name, seconds]) => [name, (seconds * 1_000_000) / count]),
      ),
    };
    costs.push(cost);
    say(
      `  ${levelName(clients)}: ${cost.count} operations, ${cost.perSecond.toFixed(1)}/s, ${cost.wallMsPerOp.toFixed(2)} ms of wall each, p50 ${cost.p50Ms.toFixed(1)} ms`,
    );
  }
  return costs;
}

/**
 * Below this growth of a cost per operation from one level to the next (4× the clients) nothing
 * is named; at or above it the cost is marked a step. CPU per operation that rises by half again
 * as the clients quadruple is more than batching's shrinking shares and the scheduler's noise
 * explain. The p50 is printed but never judged: with the clients 4× as many and the rate the
 * same, each waits 4× as long (Little's law), which is queueing, not a cost per operation.
 */
const STEP = 1.5;
/**
 * Wall per operation at or above this share of the level before's, with 4× the clients: the
 * service gave no more operations per second for more clients, the curve's knee.
 */
const SATURATED = 0.9;

/** Prints the levels' costs and how each grew from one level to the next. */
export function printGrowth(
  title: string,
  unit: string,
  costs: readonly LevelCost[],
  say: (line: string) => void,
): void {
  const processes = [...new Set(costs.flatMap((cost) => Object.keys(cost.cpuUsPerOp)))];
  say("");
  say(`${title}: cost per ${unit} at each level`);
  say(
    `| clients | ${unit}s | ${unit}s/s | wall ms per ${unit} | p50 ms | ${processes.map((name) => `${name} CPU µs`).join(" | ")} |`,
  );
  say(`|---|---|---|---|---|${processes.map(() => "---|").join("")}`);
  for (const cost of costs) {
    const cpu = processes.map((name) => (cost.cpuUsPerOp[name] ?? 0).toFixed(0)).join(" | ");
    say(
      `| ${cost.clients} | ${cost.count} | ${cost.perSecond.toFixed(1)} | ${cost.wallMsPerOp.toFixed(2)} | ${cost.p50Ms.toFixed(1)} | ${cpu} |`,
    );
  }
  if (costs.length < 2) return;
  say("");
  say(
    `how each cost grew from one level to the next (× the level before; a step: a cost per ${unit} ≥ ${STEP}×; saturated: wall per ${unit} ≥ ${SATURATED}× for more clients)`,
  );
  say(
    `| clients | wall per ${unit} | p50 | ${processes.map((name) => `${name} CPU`).join(" | ")} | finding |`,
  );
  say(`|---|---|---|${processes.map(() => "---|").join("")}---|`);
  for (let n = 1; n < costs.length; n++) {
    const from = costs[n - 1]!;
    const to = costs[n]!;
    const wall = to.wallMsPerOp / from.wallMsPerOp;
    const cpu = processes.map((name): [string, number] => [
      name,
      (to.cpuUsPerOp[name] ?? 0) / (from.cpuUsPerOp[name] ?? 0),
    ]);
    const findings = [
      ...(wall >= STEP
        ? ["step: wall"]
        : wall >= SATURATED && to.clients > from.clients
          ? ["saturated"]
          : []),
      ...cpu
        .filter(([, growth]) => Number.isFinite(growth) && growth >= STEP)
        .map(([name]) => `step: ${name} CPU`),
    ];
    say(
      `| ${from.clients} → ${to.clients} | ${wall.toFixed(2)}× | ${(to.p50Ms / from.p50Ms).toFixed(2)}× | ${cpu.map(([, growth]) => `${growth.toFixed(2)}×`).join(" | ")} | ${findings.length > 0 ? findings.join(", ") : "none"} |`,
    );
  }
}
