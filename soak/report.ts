/** The soak's closing report: memory per process, requests, limits, money, and one line per goal. */
import type { LimitLine } from "./limits.ts";
import type { MoneyCheck } from "./money.ts";
import { mebibytes, type Tally } from "./tally.ts";

/**
 * The soak's own bound (no documented service limit): RSS at the end within +15 % of its value after warm-up.
 */
export const RSS_GROWTH_ALLOWED = 0.15;

export type MemoryRow = {
  name: string;
  start: number | undefined;
  warm: number | undefined;
  end: number | undefined;
  peak: number | undefined;
  /** Counted in the RSS goal (the soak's own process is not part of the service). */
  inGoal: boolean;
};

/** RSS of every process at one moment of the load, seconds after it started. */
export type MemorySample = { atSeconds: number; bytes: Record<string, number | undefined> };

export type SoakReport = {
  memory: MemoryRow[];
  /** Samples every MEMORY_TIMELINE_SECONDS, to see whether a process levels off or keeps growing. */
  timeline: MemorySample[];
  tally: Tally;
  limits: LimitLine[];
  money: MoneyCheck;
  actions: Record<string, number>;
  warmUpSeconds: number;
  measuredSeconds: number;
};

const pad = (text: string, width: number): string => text.padEnd(width);
const padLeft = (text: string, width: number): string => text.padStart(width);

function ratio(row: MemoryRow): number | undefined {
  return row.warm && row.end ? row.end / row.warm : undefined;
}

/** The report's lines, the goal lines last. */
export function reportLines(report: SoakReport): string[] {
  const lines: string[] = [];
  lines.push(
    "",
    `Memory per process (RSS; Postgres: PSS summed over its processes), warm-up = first ${report.warmUpSeconds} s of load, then ${report.measuredSeconds} s measured`,
  );
  lines.push(
    `  ${pad("process", 34)}${padLeft("start", 10)}${padLeft("warm-up", 10)}${padLeft("end", 10)}${padLeft("end/warm", 10)}${padLeft("peak", 10)}`,
  );
  for (const row of report.memory) {
    const r = ratio(row);
    lines.push(
      `  ${pad(row.name, 34)}${padLeft(mebibytes(row.start), 10)}${padLeft(mebibytes(row.warm), 10)}${padLeft(mebibytes(row.end), 10)}${padLeft(r === undefined ? "n/a" : r.toFixed(3), 10)}${padLeft(mebibytes(row.peak), 10)}`,
    );
  }

  if (report.timeline.length > 0) {
    lines.push("", "RSS during the load (MiB), by seconds since its start");
    lines.push(
      `  ${pad("process", 34)}${report.timeline.map((sample) => padLeft(`${sample.atSeconds} s`, 7)).join("")}`,
    );
    for (const row of report.memory) {
      lines.push(
        `  ${pad(row.name, 34)}${report.timeline.map((sample) => padLeft(mebibytes(sample.bytes[row.name]).replace(" MiB", ""), 7)).join("")}`,
      );
    }
  }

  lines.push("", "Requests by route kind and status");
  const statuses = [...report.tally.byStatus().keys()];
  lines.push(
    `  ${pad("route kind", 24)}${statuses.map((status) => padLeft(status, 10)).join("")}${padLeft("total", 10)}`,
  );
  for (const [kind, counts] of [...report.tally.byKind].sort(([a], [b]) => a.localeCompare(b))) {
    const total = [...counts.values()].reduce((sum, count) => sum + count, 0);
    lines.push(
      `  ${pad(kind, 24)}${statuses.map((status) => padLeft(String(counts.get(status) ?? "."), 10)).join("")}${padLeft(String(total), 10)}`,
    );
  }
  lines.push(
    `  ${pad("all", 24)}${statuses.map((status) => padLeft(String(report.tally.byStatus().get(status)), 10)).join("")}${padLeft(String(report.tally.total), 10)}`,
  );
  lines.push(
    `  agent actions at the end: ${Object.entries(report.actions)
      .map(([status, count]) => `${count} ${status}`)
      .join(", ")}`,
  );
  for (const example of report.tally.failureExamples) lines.push(`  5xx / no answer: ${example}`);

  lines.push("", "Limits held (expected vs observed)");
  for (const limit of report.limits) {
    const verdict = `${limit.held ? "held" : "BROKEN"}${limit.exercised ? "" : ", not reached in this run"}`;
    lines.push(`  ${pad(limit.name, 42)} ${verdict}`);
    lines.push(`      expected: ${limit.expected}`);
    lines.push(`      observed: ${limit.observed}`);
  }

  const money = report.money;
  lines.push(
    "",
    `Money (wei, at block ${money.blocks - 1}; ${money.transactions} transactions since genesis)`,
  );
  for (const category of money.categories) {
    lines.push(
      `  ${pad(`${category.name} (${category.addresses})`, 44)}${padLeft(category.wei.toString(), 34)}`,
    );
  }
  lines.push(`  ${pad("balances", 44)}${padLeft(money.balancesWei.toString(), 34)}`);
  lines.push(`  ${pad("+ fees of every receipt", 44)}${padLeft(money.feesWei.toString(), 34)}`);
  lines.push(`  ${pad("= total", 44)}${padLeft((money.balancesWei + money.feesWei).toString(), 34)}`);
  lines.push(`  ${pad("genesis allocation", 44)}${padLeft(money.genesisWei.toString(), 34)}`);
  lines.push(`  ${pad("difference", 44)}${padLeft(money.differenceWei.toString(), 34)}`);
  lines.push(
    `  (tips to the coinbase 0x0: ${money.coinbaseWei} wei held, ${money.tipsWei} wei paid; the rest of the fees is the burnt base fee)`,
  );

  const inGoal = report.memory.filter((row) => row.inGoal);
  const grown = inGoal.filter((row) => {
    const r = ratio(row);
    return r === undefined || r > 1 + RSS_GROWTH_ALLOWED;
  });
  lines.push(
    "",
    `goal: zero 5xx (and every request answered): ${report.tally.failures === 0 ? "met" : `not met (${report.tally.failures})`}`,
    `goal: RSS of every process within +${RSS_GROWTH_ALLOWED * 100} % of its after-warm-up value: ${grown.length === 0 ? "met" : `not met (${grown.map((row) => row.name).join(", ")})`}`,
    `goal: money conserved to the wei: ${money.differenceWei === 0n ? "met" : `not met (difference ${money.differenceWei} wei)`}`,
  );
  return lines;
}
