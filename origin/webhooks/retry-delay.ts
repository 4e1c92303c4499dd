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

/** RFC 850's date, obsolete but still an HTTP date: `Sunday, 06-Nov-94 08:49:37 GMT`. */
const RFC850_DATE = /^[A-Za-z]{6,9}, (\d{2})-([A-Za-z]{3})-(\d{2}) (\d{2}:\d{2}:\d{2}) GMT$/;
/** C's asctime() date, obsolete but still an HTTP date, in GMT: `Sun Nov  6 08:49:37 1994`. */
const ASCTIME_DATE = /^[A-Za-z]{3} ([A-Za-z]{3}) ([ \d]\d) (\d{2}:\d{2}:\d{2}) (\d{4})$/;

/**
 * An HTTP date in any of its three forms (RFC 9110 5.6.7: a recipient accepts all three), as ms
 * since the epoch; NaN when it is none.
 */
function parseHttpDate(text: string, now: Date): number {
  // The preferred form: it names its weekday and zone, so a bare number of another shape is not one.
  if (/^[A-Za-z]{3},/.test(text)) return Date.parse(text);
  const rfc850 = RFC850_DATE.exec(text);
  if (rfc850) {
    const [, day, month, yy, time] = rfc850 as unknown as [string, string, string, string, string];
    // A two-digit year more than 50 years ahead is the latest past year with those digits.
    const nowYear = now.getUTCFullYear();
    let year = nowYear - (nowYear % 100) + Number(yy);
    if (year > nowYear + 50) year -= 100;
    return Date.parse(`${day} ${month} ${year} ${time} GMT`);
  }
  const asctime = ASCTIME_DATE.exec(text);
  if (asctime) {
    const [, month, day, time, year] = asctime as unknown as [string, string, string, string, string];
    return Date.parse(`${day.trim()} ${month} ${year} ${time} GMT`);
  }
  return Number.NaN;
}

/**
 * The seconds a `Retry-After` header asks for, a whole number of seconds or an HTTP date; undefined
 * when absent or unreadable. A date already past asks for nothing more than the schedule.
 */
export function parseRetryAfter(value: string | undefined, now: Date): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d{1,10}$/.test(text)) return Number(text);
  const at = parseHttpDate(text, now);
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
