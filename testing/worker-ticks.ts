import type { OriginMetrics } from "../origin/metrics/metrics.ts";
import { sleep } from "../shared/sleep.ts";
import { parsePrometheusText } from "./prometheus.ts";

/** An origin of a test, as far as its workers' ticks go. */
type WithMetrics = { deps: { metrics: OriginMetrics } };

/** The ticks `worker` has ended without failing on `origin`, read from its metrics as a scrape reads them. */
export async function okTicksOf(origin: WithMetrics, worker: string): Promise<number> {
  const metrics = parsePrometheusText(await origin.deps.metrics.render());
  const ticks = metrics.value("origin_worker_ticks_total", { worker, outcome: "ok" });
  if (ticks === undefined) throw new Error(`the origin runs no worker ${worker}`);
  return ticks;
}

/**
 * Resolves once `worker` has run `rounds` whole ticks on each of `origins`, each begun after this
 * call: what a test that asserts that nothing happens over those rounds waits for. A fixed sleep
 * could pass with no round run at all, on a loaded machine. A tick that ends first may have begun
 * before the call, so it is not counted.
 */
export async function afterWholeTicks(
  origins: readonly WithMetrics[],
  worker: string,
  rounds: number,
  timeoutMs = 30_000,
): Promise<void> {
  const wanted = await Promise.all(
    origins.map(async (origin) => (await okTicksOf(origin, worker)) + rounds + 1),
  );
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = await Promise.all(origins.map((origin) => okTicksOf(origin, worker)));
    if (now.every((ticks, index) => ticks >= wanted[index]!)) return;
    if (Date.now() > deadline) {
      throw new Error(
        `${worker} ran ${now.join(", ")} ticks in ${timeoutMs} ms, waiting for ${wanted.join(", ")}`,
      );
    }
    await sleep(50);
  }
}
