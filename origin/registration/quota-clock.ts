/**
 * The windows of the registration quotas: UTC days and whole minutes
 * (docs/api.md#registration-quotas-and-counters).
 */

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

/** `YYYY-MM-DD` of the UTC day `now` falls in. */
export function utcDay(now: Date): string {
  return now.toISOString().slice(0, 10);
}

/** The start of the minute `now` falls in: the key of the per-minute attempt counters. */
export function minuteStart(now: Date): Date {
  return new Date(Math.floor(now.getTime() / MINUTE_MS) * MINUTE_MS);
}

/**
 * Whole seconds from `now` until the minute starting at `minute` ends, at least 1. A refusal
 * names the end of the window it was judged in: a request that waited past it (on another node's
 * admission holding the counts' row) is over its window already, and told 1, not a minute more.
 */
export function secondsToEndOfMinute(minute: Date, now: Date): number {
  return secondsUntil(minute.getTime() + MINUTE_MS, now);
}

/**
 * Whole seconds from `now` until the UTC day `day` (`YYYY-MM-DD`) ends, at least 1: a request
 * judged on a day that ended while it waited (on the policy lock, for keys) is told 1, not the
 * whole next day, which it was never refused on.
 */
export function secondsToEndOfUtcDay(day: string, now: Date): number {
  return secondsUntil(Date.parse(`${day}T00:00:00Z`) + DAY_MS, now);
}

/** Whole seconds from `now` until `endMs`, at least 1 (a Retry-After of 0 invites a loop). */
function secondsUntil(endMs: number, now: Date): number {
  return Math.max(1, Math.ceil((endMs - now.getTime()) / 1000));
}
