const HOUR_MS = 3_600_000;

/** One UTC hour's counts by label. */
export type HourCounts = { start: Date; counts: Partial<Record<string, number>> };

/**
 * Counts by label per UTC hour, in this process's memory, over the last `hours` hours: what a
 * Prometheus counter cannot give back (its value since start, not per hour). Older hours are
 * dropped as new ones start, so it holds at most `hours` maps of a bounded label set.
 */
export class HourlyCounts<L extends string> {
  private readonly buckets = new Map<number, Map<L, number>>();

  constructor(private readonly hours: number) {}

  add(label: L, at: Date): void {
    const hour = Math.floor(at.getTime() / HOUR_MS) * HOUR_MS;
    let bucket = this.buckets.get(hour);
    if (!bucket) {
      bucket = new Map();
      this.buckets.set(hour, bucket);
      for (const start of this.buckets.keys()) {
        if (start <= hour - this.hours * HOUR_MS) this.buckets.delete(start);
      }
    }
    bucket.set(label, (bucket.get(label) ?? 0) + 1);
  }

  /** The `hours` UTC hours up to the one holding `now`, oldest first, an empty hour as `{}`. */
  read(now: Date): HourCounts[] {
    const last = Math.floor(now.getTime() / HOUR_MS) * HOUR_MS;
    const hours: HourCounts[] = [];
    for (let i = this.hours - 1; i >= 0; i--) {
      const start = last - i * HOUR_MS;
      hours.push({ start: new Date(start), counts: Object.fromEntries(this.buckets.get(start) ?? []) });
    }
    return hours;
  }
}
