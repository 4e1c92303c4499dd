/**
 * What the origin lately answered 429 with a Retry-After, each until that wait is over: the edge
 * answers the same request itself meanwhile, so a flood past a limit of the origin's costs the
 * origin one request per key and window rather than one per attempt. Kept in the isolate's memory:
 * another isolate, or one started since, forwards as before and the origin's own limits still hold.
 */
import { RecencyMap } from "../shared/recency-map.ts";

/**
 * The longest a refusal is remembered, whatever its Retry-After: a spent daily quota answers the
 * hours to the next UTC day, and an operator's raised quota should reach the edge within a minute.
 */
export const REMEMBER_AT_MOST_MS = 60_000;

/** The whole seconds of a 429's Retry-After, or undefined for any other answer (or no usable wait). */
export function refusalSeconds(response: Response): number | undefined {
  if (response.status !== 429) return undefined;
  const seconds = Number(response.headers.get("retry-after"));
  return Number.isSafeInteger(seconds) && seconds > 0 ? seconds : undefined;
}

export class RememberedRefusals<Value> {
  /**
   * Key → until when it is remembered (ms), when the origin's wait ends (ms), and what to answer,
   * in the order they were remembered. The two differ past REMEMBER_AT_MOST_MS: the edge forgets
   * sooner, but while it answers, it names the origin's wait, not its own memory (a spent day's
   * quota is still spent after the minute the edge keeps it).
   */
  private readonly until = new RecencyMap<string, { until: number; waitEnds: number; value: Value }>();

  /** `capacity`: keys remembered at once; past it the oldest is forgotten (the origin refuses it again). */
  constructor(
    private readonly capacity: number,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The key's remembered refusal with the whole seconds left of the origin's wait (at least 1), or
   * undefined.
   */
  lookup(key: string): { secondsLeft: number; value: Value } | undefined {
    const known = this.until.get(key);
    if (known === undefined) return undefined;
    const now = this.now();
    if (known.until - now > 0)
      return { secondsLeft: Math.ceil((known.waitEnds - now) / 1_000), value: known.value };
    this.until.delete(key);
    return undefined;
  }

  /** Remembers a refusal of `seconds` for the key (kept REMEMBER_AT_MOST_MS at most). */
  remember(key: string, seconds: number, value: Value): void {
    if (!this.until.has(key) && this.until.size >= this.capacity) this.until.shift();
    const now = this.now();
    this.until.set(key, {
      until: now + Math.min(seconds * 1_000, REMEMBER_AT_MOST_MS),
      waitEnds: now + seconds * 1_000,
      value,
    });
  }
}
