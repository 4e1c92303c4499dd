/**
 * The client addresses the origin lately answered a registration with 429, each until its
 * Retry-After (remembered-refusals.ts): the edge refuses their next attempts itself (docs/api.md,
 * "Registration quotas and counters"). An IPv6 client is remembered by its /64, as the origin
 * counts it (address-group.ts).
 */
import { addressGroupKey } from "./address-group.ts";
import { REMEMBER_AT_MOST_MS, RememberedRefusals, refusalSeconds } from "./remembered-refusals.ts";

export { REMEMBER_AT_MOST_MS };
/** Addresses remembered at once; past it the oldest is forgotten (the origin refuses it again). */
export const REMEMBERED_ADDRESSES = 10_000;

export class RegistrationBackoff {
  private readonly refusals: RememberedRefusals<true>;

  constructor(now: () => number = Date.now) {
    this.refusals = new RememberedRefusals(REMEMBERED_ADDRESSES, now);
  }

  /** Whole seconds left of the origin's wait for the address's remembered refusal (at least 1), or undefined. */
  secondsLeft(address: string): number | undefined {
    return this.refusals.lookup(addressGroupKey(address))?.secondsLeft;
  }

  /** Remembers the origin's answer to the address's registration when it is a 429 with Retry-After. */
  observe(address: string, response: Response): void {
    const seconds = refusalSeconds(response);
    if (seconds !== undefined) this.refusals.remember(addressGroupKey(address), seconds, true);
  }
}
