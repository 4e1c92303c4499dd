import { type LimiterBucket, SlidingWindowLimiter } from "../../shared/rate-limiter.ts";

export type EarlyLimits = { perIpGroup: number; global: number };

export type EarlyDecision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/** The key of the node-wide window; IP groups are 64-hex HMACs, so they never collide with it. */
const GLOBAL_KEY = "*";

/**
 * How long the attempt limits of one state read may refuse later attempts without a read of their
 * own. Past the minute's limit a flood is refused here instead of costing a database read each;
 * an operator's raised limit reaches this node at most this much later (a lowered one at once: a
 * looser remembered limit only lets the attempt go on to read the policy).
 */
export const REMEMBERED_LIMITS_MS = 1_000;

/**
 * The early local limiter, in memory per node, in front of the database admission. It holds the
 * attempt limits of the policy (per IP group and overall, per 60 s sliding window) on this node
 * alone, so a flood is turned away without a database write; the persisted counters behind it hold
 * the same limits across every node. A refusal here moves no persisted counter (the counters count
 * the attempts admitted to the database, not refusals by the early local limiter:
 * docs/api.md#registration-quotas-and-counters). Limits come from the policy on each call to
 * `consume`, so an operator's change applies at once there; `refuseBeforeRead` judges by the
 * limits of the last such call while they are under REMEMBERED_LIMITS_MS old.
 */
export class EarlyLimiter {
  private readonly windows: SlidingWindowLimiter;
  private readonly now: () => number;
  private remembered: { limits: EarlyLimits; at: number } | undefined;

  constructor(now: () => number = Date.now) {
    this.now = now;
    // One limiter for both: the group keys and the global key share the window and the key bound.
    this.windows = new SlidingWindowLimiter({ limit: 0, windowSeconds: 60, maxKeys: 100_000, now });
  }

  /** Counts one attempt for the group and the node if both have room; otherwise counts nothing. */
  consume(ipGroup: string, limits: EarlyLimits): EarlyDecision {
    this.remembered = { limits, at: this.now() };
    const decision = this.judge(ipGroup, limits);
    if (!decision.allowed) return decision;
    this.windows.record(ipGroup);
    this.windows.record(GLOBAL_KEY);
    return { allowed: true };
  }

  /**
   * The refusal `consume` would answer now under the limits it was last given, if those are
   * fresh (REMEMBERED_LIMITS_MS): a request past them is refused before the policy is read.
   * Undefined when they are stale or there is room. Counts nothing.
   */
  refuseBeforeRead(ipGroup: string): Extract<EarlyDecision, { allowed: false }> | undefined {
    const remembered = this.remembered;
    if (!remembered || this.now() - remembered.at >= REMEMBERED_LIMITS_MS) return undefined;
    const decision = this.judge(ipGroup, remembered.limits);
    return decision.allowed ? undefined : decision;
  }

  /** Groups (and the node-wide key `*`) with attempts in the window, most recent first (console). */
  snapshot(max: number): LimiterBucket[] {
    return this.windows.snapshot(max);
  }

  private judge(ipGroup: string, limits: EarlyLimits): EarlyDecision {
    const group = this.windows.peek(ipGroup, limits.perIpGroup);
    if (!group.allowed) return group;
    return this.windows.peek(GLOBAL_KEY, limits.global);
  }
}
