import { readFile } from "node:fs/promises";

export type CpuTicks = { steal: number; total: number };

/** CPU time the hypervisor took from this VM (the "steal" column of /proc/stat), in ticks. */
export async function cpuTicks(): Promise<CpuTicks | undefined> {
  try {
    const first = (await readFile("/proc/stat", "utf8")).split("\n")[0]!;
    const fields = first.trim().split(/\s+/).slice(1).map(Number);
    return { steal: fields[7] ?? 0, total: fields.reduce((a, b) => a + b, 0) };
  } catch {
    return undefined;
  }
}

/**
 * Measures the steal over a run: call the result when the run ends to get the line to print.
 * Benchmarks print it beside their figures, since this shared VM's speed drifts with it.
 */
export async function startStealMeter(): Promise<() => Promise<string>> {
  const before = await cpuTicks();
  return async () => {
    const after = await cpuTicks();
    if (!before || !after || after.total === before.total) return "CPU steal during the run: unknown";
    const share = (after.steal - before.steal) / (after.total - before.total);
    return `CPU time taken by the hypervisor during the run (steal): ${(share * 100).toFixed(1)} %`;
  };
}
