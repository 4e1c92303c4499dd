/**
 * The client addresses the origin lately answered a registration with 429, each until its
 * Retry-After: the edge refuses their next attempts itself, so a flood past the attempt limits
 * costs the origin one request per address and window rather than one per attempt (docs/api.md,
 * "Registration quotas and counters"). Kept in the isolate's memory: another isolate, or one
 * started since, forwards as before and the origin's own limits still hold.
 */

/**
 * The longest a refusal is remembered, whatever its Retry-After: a spent daily quota answers the
 * hours to the next UTC day, and an operator's raised quota should reach the edge within a minute.
 */
export const REMEMBER_AT_MOST_MS = 60_000;
/** Addresses remembered at once; past it the oldest is forgotten (the origin refuses it again). */
export const REMEMBERED_ADDRESSES = 10_000;

export class RegistrationBackoff {
  /** Address → when its refusal ends (ms), in the order they were remembered. */
  private readonly until = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Whole seconds left of the address's remembered refusal (at least 1), or undefined. */
  secondsLeft(address: string): number | undefined {
    const until = this.until.get(address);
    if (until === undefined) return undefined;
    const left = until - this.now();
    if (left > 0) return Math.ceil(left / 1_000);
    this.until.delete(address);
    return undefined;
  }

  /** Remembers the origin's answer to the address's registration when it is a 429 with Retry-After. */
  observe(address: string, response: Response): void {
    if (response.status !== 429) return;
    const seconds = Number(response.headers.get("retry-after"));
    if (!Number.isSafeInteger(seconds) || seconds <= 0) return;
    this.until.delete(address);
    if (this.until.size >= REMEMBERED_ADDRESSES) {
      const oldest = this.until.keys().next().value;
      if (oldest !== undefined) this.until.delete(oldest);
    }
    this.until.set(address, this.now() + Math.min(seconds * 1_000, REMEMBER_AT_MOST_MS));
  }
}
