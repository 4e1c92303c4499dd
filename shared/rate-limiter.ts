import { RecencyMap } from "./recency-map.ts";

/**
 * Sliding-window counters kept in memory per node (docs/api.md#rate-limits). Each key keeps a count
 * per second that had events, oldest first, so a count ages out within a second of leaving the
 * window without a timestamp per request, and a key with a few events (the usual failing client)
 * costs about 160 bytes. The number of keys is bounded: the key with the oldest last event is
 * dropped first, in constant time however many keys there are, so memory and the cost of a new
 * key stay flat under many client IPs.
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

export type LimiterBucket = { key: string; count: number; lastSecond: number };

/** Flat pairs `second, count` of the seconds with events, oldest first. */
type Events = number[];

export class SlidingWindowLimiter {
  readonly limit: number;
  readonly windowSeconds: number;
  private readonly maxKeys: number;
  private readonly now: () => number;
  /** In the order of each key's last event: the most recent last. */
  private readonly keys = new RecencyMap<string, Events>();

  constructor(options: SlidingWindowLimiterOptions) {
    this.limit = options.limit;
    this.windowSeconds = options.windowSeconds;
    this.maxKeys = options.maxKeys ?? 100_000;
    this.now = options.now ?? Date.now;
  }

  /**
   * Counts one event for `key` if it fits in the window; refuses it otherwise. `limit` overrides
   * the constructor's for this call (limits read from a policy that an operator may change).
   */
  consume(key: string, limit = this.limit): LimitDecision {
    const decision = this.peek(key, limit);
    if (decision.allowed) this.record(key);
    return decision.allowed ? { allowed: true, remaining: decision.remaining - 1 } : decision;
  }

  /** Whether one more event would fit, without counting it. */
  peek(key: string, limit = this.limit): LimitDecision {
    const events = this.keys.get(key);
    const second = this.currentSecond();
    const used = events ? this.countIn(events, second) : 0;
    if (used < limit) return { allowed: true, remaining: limit - used };
    const retryAfterSeconds =
      events && limit > 0 ? this.secondsUntilFree(events, second, used, limit) : this.windowSeconds;
    return { allowed: false, retryAfterSeconds };
  }

  /** Counts one event, whether or not it fits. */
  record(key: string): void {
    const second = this.currentSecond();
    const events = this.keys.touch(key);
    if (!events) {
      if (this.keys.size >= this.maxKeys) this.keys.shift();
      // A literal, not push(): an array grown by push reserves room for 17 numbers.
      this.keys.set(key, [second, 1]);
      return;
    }
    this.dropExpired(events, second);
    if (events.length > 0 && events[events.length - 2] === second) events[events.length - 1]!++;
    else events.push(second, 1);
  }

  /**
   * Keys with events in the window, their counts and the last second (Unix) with an event, most
   * recent first, at most `max` (the operator console): it reads those keys alone, however many
   * keys a flood has left.
   */
  snapshot(max: number): LimiterBucket[] {
    const second = this.currentSecond();
    const out: LimiterBucket[] = [];
    for (const { key, value: events } of this.keys.newestFirst()) {
      if (out.length >= max) break;
      const count = this.countIn(events, second);
      // Keys are in the order of their last event: once one has none left in the window, no
      // older key has either.
      if (count === 0) break;
      out.push({ key, count, lastSecond: events[events.length - 2]! });
    }
    return out;
  }

  get size(): number {
    return this.keys.size;
  }

  private currentSecond(): number {
    return Math.floor(this.now() / 1000);
  }

  private countIn(events: Events, second: number): number {
    this.dropExpired(events, second);
    let total = 0;
    for (let i = 1; i < events.length; i += 2) total += events[i]!;
    return total;
  }

  /** Drops the seconds that have left the window (they are the oldest, at the front). */
  private dropExpired(events: Events, second: number): void {
    let expired = 0;
    while (expired < events.length && second - events[expired]! >= this.windowSeconds) expired += 2;
    if (expired > 0) events.splice(0, expired);
  }

  /** Seconds until enough old events leave the window for one more event to fit. */
  private secondsUntilFree(events: Events, second: number, used: number, limit: number): number {
    let excess = used - limit + 1;
    for (let i = 0; i < events.length; i += 2) {
      excess -= events[i + 1]!;
      if (excess <= 0) return this.windowSeconds - (second - events[i]!);
    }
    return this.windowSeconds;
  }
}
