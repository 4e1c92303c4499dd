/**
 * When a failed delivery is tried next (docs/operations.md#webhooks): the schedule's step, made a
 * little longer by a random fraction so endpoints that failed together do not retry in lockstep,
 * and later still when the receiver asked for it with `Retry-After` on a 429 or 503, up to an hour.
 */

/** The most of the schedule's step added at random: up to a tenth longer, never shorter. */
export const JITTER_FRACTION = 0.1;
/** A receiver's `Retry-After` is honoured up to this (a longer one would park the delivery). */
export const MAX_RETRY_AFTER_SECONDS = 3_600;
/** The statuses whose `Retry-After` is read: the receiver says it is busy, not that it refuses. */
export const RETRY_AFTER_STATUSES: ReadonlySet<number> = new Set([429, 503]);

/**
 * The seconds a `Retry-After` header asks for, a whole number of seconds or an HTTP date; undefined
 * when absent or unreadable. A date already past asks for nothing more than the schedule.
 */
export function parseRetryAfter(value: string | undefined, now: Date): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d{1,10}$/.test(text)) return Number(text);
  // An HTTP date always names its weekday and zone: a bare number of another shape is not one.
  if (!/^[A-Za-z]{3},/.test(text)) return undefined;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, Math.ceil((at - now.getTime()) / 1000));
}

export type RetryDelayParams = {
  /** The schedule's step for this retry, in seconds. */
  scheduledSeconds: number;
  /** What the receiver asked for, when it did (on a 429 or 503). */
  retryAfterSeconds: number | undefined;
  /** A number in [0, 1): Math.random in the worker, fixed in tests. */
  random: number;
};

/** Seconds until the next attempt, to the millisecond: never earlier than the schedule's step. */
export function retryDelaySeconds(params: RetryDelayParams): number {
  const jittered = params.scheduledSeconds * (1 + JITTER_FRACTION * params.random);
  const asked =
    params.retryAfterSeconds === undefined ? 0 : Math.min(params.retryAfterSeconds, MAX_RETRY_AFTER_SECONDS);
  return Math.round(Math.max(jittered, asked) * 1000) / 1000;
}
