/**
 * Ours: the few database reads an address still gets past its failure limit (60 failed
 * authentications a minute: docs/api.md#rate-limits) for tokens that have not worked from it, so
 * that a fresh valid token behind a neighbour sending bad tokens is not locked out with it
 * (docs/security.md#floods-and-what-they-still-get). Tokens that have worked from the address pass
 * as before (origin/auth/recent-authentications.ts); for any other token id, per address and per
 * minute:
 *  - `firstSight` reads for ids this address has not presented since its lockout began;
 *  - `comeBack` reads for ids it presented before and was refused (told Retry-After: 1), so a client
 *    that follows Retry-After gets in even while random bad tokens use up the first lane: each of
 *    those is sent once, never comes back, and so never reaches this lane;
 *  - an id that fails after such a read is not read again from that address within the minute.
 * Bad tokens answer 429 whichever lane read them, so an address still sees at most 60 answers 401
 * a minute. An attacker that sends each bad token twice can hold both lanes, and costs the
 * database `firstSight` + `comeBack` reads a minute for it. In memory per node, like the windows;
 * the edge keeps one of its own per isolate, in front of the origin's (edge-worker/lockouts.ts).
 */
import { SlidingWindowLimiter } from "./rate-limiter.ts";
import { RecencyMap } from "./recency-map.ts";

export const LOCKOUT_ALLOWANCE = {
  windowSeconds: 60,
  firstSight: 3,
  comeBack: 6,
  /** What a refused id is told: come back in a second, into the come-back lane. */
  retryAfterSeconds: 1,
  /** Ids remembered as refused or spent, across addresses; the least recently touched goes first. */
  maxEntries: 20_000,
} as const;

export type LockoutDecision =
  | { admitted: true; lane: "first_sight" | "come_back" }
  | { admitted: false; retryAfterSeconds: number };

type Limits = { [K in keyof typeof LOCKOUT_ALLOWANCE]: number };

export type LockoutAllowanceOptions = Partial<Limits> & { now?: () => number };

export class LockoutAllowance {
  private readonly limits: Limits;
  private readonly now: () => number;
  private readonly firstSight: SlidingWindowLimiter;
  private readonly comeBack: SlidingWindowLimiter;
  /** `source token_id` → what happened to the id there, and when (Unix second); least recent first. */
  private readonly ids = new RecencyMap<string, { state: "refused" | "spent"; second: number }>();

  constructor(options: LockoutAllowanceOptions = {}) {
    const { now, ...limits } = options;
    this.limits = { ...LOCKOUT_ALLOWANCE, ...limits };
    this.now = now ?? Date.now;
    const windowSeconds = this.limits.windowSeconds;
    this.firstSight = new SlidingWindowLimiter({
      limit: this.limits.firstSight,
      windowSeconds,
      now: this.now,
    });
    this.comeBack = new SlidingWindowLimiter({ limit: this.limits.comeBack, windowSeconds, now: this.now });
  }

  /**
   * Whether `tokenId`, which has not worked from locked-out `source`, may be read now. `cameBack`:
   * the gate in front (the edge, edge-worker/lockouts.ts) refused it with Retry-After: 1 itself, so
   * it comes back into the come-back lane though this allowance never saw it.
   */
  admit(source: string, tokenId: string, cameBack = false): LockoutDecision {
    const key = `${source} ${tokenId}`;
    const second = this.second();
    const seen = this.ids.get(key);
    const entry = seen && second - seen.second < this.limits.windowSeconds ? seen : undefined;
    if (entry?.state === "spent") {
      return { admitted: false, retryAfterSeconds: this.limits.windowSeconds - (second - entry.second) };
    }
    const comesBack = entry !== undefined || cameBack;
    const lane = comesBack ? this.comeBack : this.firstSight;
    const decision = lane.consume(source);
    if (decision.allowed) return { admitted: true, lane: comesBack ? "come_back" : "first_sight" };
    if (comesBack) return { admitted: false, retryAfterSeconds: decision.retryAfterSeconds };
    this.note(key, "refused", second);
    return { admitted: false, retryAfterSeconds: this.limits.retryAfterSeconds };
  }

  /** `tokenId` was read through a lane and failed: not read again from `source` this window. */
  failed(source: string, tokenId: string): void {
    this.note(`${source} ${tokenId}`, "spent", this.second());
  }

  get size(): number {
    return this.ids.size;
  }

  private note(key: string, state: "refused" | "spent", second: number): void {
    if (!this.ids.has(key) && this.ids.size >= this.limits.maxEntries) this.ids.shift();
    this.ids.set(key, { state, second });
  }

  private second(): number {
    return Math.floor(this.now() / 1000);
  }
}
