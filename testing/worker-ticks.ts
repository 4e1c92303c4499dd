import type { OriginMetrics } from "../origin/metrics/metrics.ts";
import { sleep } from "../shared/sleep.ts";
import { parsePrometheusText } from "./prometheus.ts";

/** An origin of a test, as far as its workers' ticks go. */
type WithMetrics = { deps: { metrics: OriginMetrics } };

/** What a worker's loop counts: its ticks, or the ticks among them that swept (the tracker's). */
type Rounds = "origin_worker_ticks_total" | "origin_worker_sweeps_total";

async function okRoundsOf(origin: WithMetrics, worker: string, series: Rounds): Promise<number> {
  const metrics = parsePrometheusText(await origin.deps.metrics.render());
  const rounds = metrics.value(series, { worker, outcome: "ok" });
  if (rounds === undefined) throw new Error(`the origin runs no worker ${worker} counted in ${series}`);
  return rounds;
}

/** The ticks `worker` has ended without failing on `origin`, read from its metrics as a scrape reads them. */
export function okTicksOf(origin: WithMetrics, worker: string): Promise<number> {
  return okRoundsOf(origin, worker, "origin_worker_ticks_total");
}

/**
 * Resolves once `worker` has run `rounds` whole ticks on each of `origins`, each begun after this
 * call: what a test that asserts that nothing happens over those rounds waits for. A fixed sleep
 * could pass with no round run at all, on a loaded machine. A tick that ends first may have begun
 * before the call, so it is not counted.
 */
export function afterWholeTicks(
  origins: readonly WithMetrics[],
  worker: string,
  rounds: number,
  timeoutMs = 30_000,
): Promise<void> {
  return afterWholeRounds(origins, worker, rounds, timeoutMs, "origin_worker_ticks_total");
}

/**
 * afterWholeTicks for the ticks that sweep (the transaction tracker's, every second where it ticks
 * every 250 ms): what a test that asserts that a sweep leaves something as it was waits for.
 */
export function afterWholeSweeps(
  origins: readonly WithMetrics[],
  worker: string,
  rounds: number,
  timeoutMs = 30_000,
): Promise<void> {
  return afterWholeRounds(origins, worker, rounds, timeoutMs, "origin_worker_sweeps_total");
}

async function afterWholeRounds(
  origins: readonly WithMetrics[],
  worker: string,
  rounds: number,
  timeoutMs: number,
  series: Rounds,
): Promise<void> {
  const wanted = await Promise.all(
    origins.map(async (origin) => (await okRoundsOf(origin, worker, series)) + rounds + 1),
  );
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = await Promise.all(origins.map((origin) => okRoundsOf(origin, worker, series)));
    if (now.every((count, index) => count >= wanted[index]!)) return;
    if (Date.now() > deadline) {
      throw new Error(
        `${worker} ran ${now.join(", ")} (${series}) in ${timeoutMs} ms, waiting for ${wanted.join(", ")}`,
      );
    }
    await sleep(50);
  }
}
