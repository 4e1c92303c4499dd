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

/** Whole seconds until the next minute starts, at least 1 (a Retry-After of 0 invites a loop). */
export function secondsToNextMinute(now: Date): number {
  return Math.max(1, Math.ceil((MINUTE_MS - (now.getTime() % MINUTE_MS)) / 1000));
}

/** Whole seconds until the next UTC day starts, at least 1. */
export function secondsToNextUtcDay(now: Date): number {
  return Math.max(1, Math.ceil((DAY_MS - (now.getTime() % DAY_MS)) / 1000));
}
