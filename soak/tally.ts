/** Counts of the soak's requests by route kind and status, and the live progress line. */
import type { Answer } from "./edge-client.ts";

/** The status a request is counted under: the HTTP status, or `no answer`. */
export const statusLabel = (answer: Answer): string =>
  answer.status === 0 ? "no answer" : String(answer.status);

export class Tally {
  /** kind → status → count. */
  readonly byKind = new Map<string, Map<string, number>>();
  total = 0;
  /** Requests answered 5xx or not at all, with a few examples for the report. */
  failures = 0;
  readonly failureExamples: string[] = [];

  record(kind: string, answer: Answer): void {
    const status = statusLabel(answer);
    const counts = this.byKind.get(kind) ?? new Map<string, number>();
    counts.set(status, (counts.get(status) ?? 0) + 1);
    this.byKind.set(kind, counts);
    this.total++;
    if (answer.status === 0 || answer.status >= 500) {
      this.failures++;
      if (this.failureExamples.length < 5) {
        this.failureExamples.push(`${kind} ${status} ${JSON.stringify(answer.body).slice(0, 160)}`);
      }
    }
  }

  /** Count per status over every kind. */
  byStatus(): Map<string, number> {
    const out = new Map<string, number>();
    for (const counts of this.byKind.values()) {
      for (const [status, count] of counts) out.set(status, (out.get(status) ?? 0) + count);
    }
    return new Map([...out].sort(([a], [b]) => a.localeCompare(b)));
  }
}

export const mebibytes = (bytes: number | undefined): string =>
  bytes === undefined ? "n/a" : `${(bytes / 2 ** 20).toFixed(0)} MiB`;

/** One line: elapsed, requests per second (over the last interval), counts by status, RSS by process. */
export function progressLine(params: {
  elapsedMs: number;
  durationMs: number;
  requestsPerSecond: number;
  tally: Tally;
  memory: Record<string, number | undefined>;
}): string {
  const elapsed = `${(params.elapsedMs / 1000).toFixed(0)}/${(params.durationMs / 1000).toFixed(0)} s`;
  const statuses = [...params.tally.byStatus()].map(([status, count]) => `${status}:${count}`).join(" ");
  const memory = Object.entries(params.memory)
    .map(([name, bytes]) => `${name} ${mebibytes(bytes)}`)
    .join(", ");
  return `[soak] ${elapsed}  ${params.requestsPerSecond.toFixed(1)} req/s  ${statuses}  |  ${memory}`;
}
