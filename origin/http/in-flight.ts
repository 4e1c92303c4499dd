/**
 * Counts calls in flight per key and in total, in memory per node, and refuses one more past
 * either cap. Unlike a rate over a window, this bounds what the node holds at once: with each
 * call's buffers capped, node memory stays at most `total` × (one call's cap) plus overhead.
 */
export class InFlightLimiter {
  readonly perKey: number;
  readonly total: number;
  private readonly byKey = new Map<string, number>();
  private inFlight = 0;

  constructor(options: { perKey: number; total: number }) {
    this.perKey = options.perKey;
    this.total = options.total;
  }

  /** Takes a slot for `key`; false (nothing taken) when the key or the node is at its cap. */
  tryAcquire(key: string): boolean {
    const held = this.byKey.get(key) ?? 0;
    if (held >= this.perKey || this.inFlight >= this.total) return false;
    this.byKey.set(key, held + 1);
    this.inFlight++;
    return true;
  }

  /** Gives back a slot taken by tryAcquire; call exactly once per successful acquire. */
  release(key: string): void {
    const held = this.byKey.get(key) ?? 0;
    if (held <= 1) this.byKey.delete(key);
    else this.byKey.set(key, held - 1);
    this.inFlight = Math.max(0, this.inFlight - 1);
  }

  get size(): number {
    return this.inFlight;
  }
}
