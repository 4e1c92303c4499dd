import { type LimiterBucket, SlidingWindowLimiter } from "../http/rate-limiter.ts";

export type EarlyLimits = { perIpGroup: number; global: number };

export type EarlyDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/** The key of the node-wide window; IP groups are 64-hex HMACs, so they never collide with it. */
const GLOBAL_KEY = "*";

/**
 * The early local limiter, in memory per node, in front of the database admission. It holds the
 * attempt limits of the policy (per IP group and overall, per 60 s sliding window) on this node
 * alone, so a flood is turned away without a database write; the persisted counters behind it hold
 * the same limits across every node. A refusal here moves no persisted counter (the counters count
 * the attempts admitted to the database, not refusals by the early local limiter:
 * docs/api.md#registration-quotas-and-counters). Limits come from the policy on each call, so an
 * operator's change applies at once.
 */
export class EarlyLimiter {
  private readonly windows: SlidingWindowLimiter;

  constructor(now?: () => number) {
    // One limiter for both: the group keys and the global key share the window and the key bound.
    this.windows = new SlidingWindowLimiter({ limit: 0, windowSeconds: 60, maxKeys: 100_000, now });
  }

  /** Counts one attempt for the group and the node if both have room; otherwise counts nothing. */
  consume(ipGroup: string, limits: EarlyLimits): EarlyDecision {
    const group = this.windows.peek(ipGroup, limits.perIpGroup);
    if (!group.allowed) return group;
    const global = this.windows.peek(GLOBAL_KEY, limits.global);
    if (!global.allowed) return global;
    this.windows.record(ipGroup);
    this.windows.record(GLOBAL_KEY);
    return { allowed: true };
  }

  /** Groups (and the node-wide key `*`) with attempts in the window, most recent first (console). */
  snapshot(max: number): LimiterBucket[] {
    return this.windows.snapshot(max);
  }
}
