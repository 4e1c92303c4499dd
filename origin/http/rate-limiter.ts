/**
 * Sliding-window counters kept in memory per node (SPEC Limits: "sliding window, kept in memory
 * per node"). The window is cut into one-second slots, so a count ages out within a second of
 * leaving the window, without storing one timestamp per request. The number of keys is bounded:
 * the least recently touched key is dropped first, so memory stays flat under many client IPs.
 */
export type SlidingWindowLimiterOptions = {
  limit: number;
  windowSeconds: number;
  maxKeys?: number;
  now?: () => number;
};

export type LimitDecision =
  | { allowed: true; remaining: number }
  | { allowed: false; retryAfterSeconds: number };

type Slots = { seconds: Float64Array; counts: Uint32Array };

export class SlidingWindowLimiter {
  readonly limit: number;
  readonly windowSeconds: number;
  private readonly maxKeys: number;
  private readonly now: () => number;
  private readonly keys = new Map<string, Slots>();

  constructor(options: SlidingWindowLimiterOptions) {
    this.limit = options.limit;
    this.windowSeconds = options.windowSeconds;
    this.maxKeys = options.maxKeys ?? 100_000;
    this.now = options.now ?? Date.now;
  }

  /** Counts one event for `key` if it fits in the window; refuses it otherwise. */
  consume(key: string): LimitDecision {
    const decision = this.peek(key);
    if (decision.allowed) this.record(key);
    return decision.allowed ? { allowed: true, remaining: decision.remaining - 1 } : decision;
  }

  /**
   * Whether one more event would fit, without counting it. `pending` counts events that may yet
   * be recorded (attempts still in flight), so concurrent callers cannot all slip under the limit.
   */
  peek(key: string, pending = 0): LimitDecision {
    const slots = this.keys.get(key);
    const second = this.currentSecond();
    const recorded = slots ? this.countIn(slots, second) : 0;
    const used = recorded + pending;
    if (used < this.limit) return { allowed: true, remaining: this.limit - used };
    // Only in-flight attempts stand in the way: they settle within a request's time.
    if (!slots || recorded < this.limit) return { allowed: false, retryAfterSeconds: 1 };
    return { allowed: false, retryAfterSeconds: this.secondsUntilFree(slots, second, recorded) };
  }

  /** Counts one event unconditionally (used for failures, which are counted after the fact). */
  record(key: string): void {
    const second = this.currentSecond();
    let slots = this.keys.get(key);
    if (slots) {
      this.keys.delete(key); // re-insert: Map order doubles as least-recently-touched order
    } else {
      if (this.keys.size >= this.maxKeys) this.evictOldest();
      slots = {
        seconds: new Float64Array(this.windowSeconds).fill(-1),
        counts: new Uint32Array(this.windowSeconds),
      };
    }
    this.keys.set(key, slots);
    const index = second % this.windowSeconds;
    if (slots.seconds[index] !== second) {
      slots.seconds[index] = second;
      slots.counts[index] = 0;
    }
    slots.counts[index]!++;
  }

  /** Keys with events in the window and their counts, most recently touched first (console). */
  snapshot(max: number): { key: string; count: number }[] {
    const second = this.currentSecond();
    const out: { key: string; count: number }[] = [];
    for (const [key, slots] of [...this.keys].reverse()) {
      if (out.length >= max) break;
      const count = this.countIn(slots, second);
      if (count > 0) out.push({ key, count });
    }
    return out;
  }

  get size(): number {
    return this.keys.size;
  }

  private currentSecond(): number {
    return Math.floor(this.now() / 1000);
  }

  private countIn(slots: Slots, second: number): number {
    let total = 0;
    for (let i = 0; i < this.windowSeconds; i++) {
      if (second - slots.seconds[i]! < this.windowSeconds) total += slots.counts[i]!;
    }
    return total;
  }

  /** Seconds until enough old slots leave the window for one more event to fit. */
  private secondsUntilFree(slots: Slots, second: number, used: number): number {
    let excess = used - this.limit + 1;
    for (let age = this.windowSeconds - 1; age >= 0; age--) {
      const index = (((second - age) % this.windowSeconds) + this.windowSeconds) % this.windowSeconds;
      if (slots.seconds[index] !== second - age) continue;
      excess -= slots.counts[index]!;
      if (excess <= 0) return this.windowSeconds - age;
    }
    return this.windowSeconds;
  }

  private evictOldest(): void {
    const oldest = this.keys.keys().next();
    if (!oldest.done) this.keys.delete(oldest.value);
  }
}
