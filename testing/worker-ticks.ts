import type { OriginMetrics } from "../origin/metrics/metrics.ts";
import { sleep } from "../shared/sleep.ts";
import { parsePrometheusText } from "./prometheus.ts";

/** An origin of a test, as far as its workers' ticks go: in-process, or over HTTP (metricsOverHttp). */
type WithMetrics = { deps: { metrics: Pick<OriginMetrics, "render"> } };

/** An origin the test did not start in its own process, its metrics scraped as Prometheus does. */
export function metricsOverHttp(base: string, adminToken: string): WithMetrics {
  return {
    deps: {
      metrics: {
        async render() {
          const response = await fetch(`${base}/metrics`, {
            headers: { authorization: `Bearer ${adminToken}` },
          });
          const text = await response.text();
          if (response.status !== 200) throw new Error(`GET /metrics: ${response.status} ${text}`);
          return text;
        },
      },
    },
  };
}

/** A count of rounds a loop has ended without failing: a series and the labels of its `ok` sample. */
type Rounds = { series: string; labels: Record<string, string> };

async function okRoundsOf(origin: WithMetrics, rounds: Rounds): Promise<number> {
  const metrics = parsePrometheusText(await origin.deps.metrics.render());
  const count = metrics.value(rounds.series, rounds.labels);
  if (count === undefined)
    throw new Error(`the origin has no ${rounds.series} ${JSON.stringify(rounds.labels)}`);
  return count;
}

const ticksOf = (worker: string): Rounds => ({
  series: "origin_worker_ticks_total",
  labels: { worker, outcome: "ok" },
});

/** The ticks `worker` has ended without failing on `origin`, read from its metrics as a scrape reads them. */
export function okTicksOf(origin: WithMetrics, worker: string): Promise<number> {
  return okRoundsOf(origin, ticksOf(worker));
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
  return afterWholeRounds(origins, ticksOf(worker), rounds, timeoutMs);
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
  const sweeps = { series: "origin_worker_sweeps_total", labels: { worker, outcome: "ok" } };
  return afterWholeRounds(origins, sweeps, rounds, timeoutMs);
}

/**
 * afterWholeTicks for the reads of the origins' event feeds (origin/events/feed.ts), which hand
 * every stream and action wait its events: after two whole reads begun after this call, an event
 * written before it has reached every stream it was for (a stream that is to see nothing more has
 * seen it all). The feed runs once something follows it.
 */
export function afterFeedReads(
  origins: readonly WithMetrics[],
  reads = 2,
  timeoutMs = 30_000,
): Promise<void> {
  const feed = { series: "origin_events_feed_reads_total", labels: { outcome: "ok" } };
  return afterWholeRounds(origins, feed, reads, timeoutMs);
}

async function afterWholeRounds(
  origins: readonly WithMetrics[],
  rounds: Rounds,
  count: number,
  timeoutMs: number,
): Promise<void> {
  const wanted = await Promise.all(
    origins.map(async (origin) => (await okRoundsOf(origin, rounds)) + count + 1),
  );
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const now = await Promise.all(origins.map((origin) => okRoundsOf(origin, rounds)));
    if (now.every((ended, index) => ended >= wanted[index]!)) return;
    if (Date.now() > deadline) {
      throw new Error(
        `${rounds.series} ${JSON.stringify(rounds.labels)} reached ${now.join(", ")} in ${timeoutMs} ms, waiting for ${wanted.join(", ")}`,
      );
    }
    await sleep(50);
  }
}
