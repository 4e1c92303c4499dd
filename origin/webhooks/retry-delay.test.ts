import { describe, expect, it } from "vitest";
import { parseRetryAfter, retryDelaySeconds } from "./retry-delay.ts";

const NOW = new Date("2026-11-29T12:00:00.000Z");

describe("parseRetryAfter", () => {
  it.each([
    [undefined, undefined],
    ["", undefined],
    ["120", 120],
    [" 7 ", 7],
    ["0", 0],
    ["-5", undefined],
    ["1.5", undefined],
    ["soon", undefined],
    ["Sun, 29 Nov 2026 12:00:30 GMT", 30],
    ["Sun, 29 Nov 2026 13:00:00 GMT", 3_600],
    ["Sun, 29 Nov 2026 11:00:00 GMT", 0], // already past
    ["Sun, 32 Nov 2026 12:00:00 GMT", undefined],
    ["2026-11-29T12:00:30Z", undefined], // not an HTTP date
    // The two obsolete forms of an HTTP date, which a recipient must accept as well (RFC 9110 5.6.7).
    ["Sunday, 29-Nov-26 12:00:30 GMT", 30], // RFC 850
    ["Sunday, 29-Nov-26 13:00:00 GMT", 3_600],
    ["Sun Nov 29 12:00:30 2026", 30], // asctime, in GMT whatever the origin's zone
    ["Sun Nov  1 12:00:00 2026", 0], // asctime pads a one-digit day with a space; already past
    ["Sunday, 29-Nov-26 12:00:30", undefined], // RFC 850 names its zone
  ])("%j → %j", (value, expected) => {
    expect(parseRetryAfter(value, NOW)).toBe(expected);
  });
});

describe("retryDelaySeconds", () => {
  it.each([
    // [scheduled, Retry-After, random] → delay
    [5, undefined, 0, 5],
    [5, undefined, 0.5, 5.25], // jitter: up to a tenth of the step, never less than the step
    [300, undefined, 0.999, 329.97],
    [0, undefined, 0.7, 0], // an immediate retry stays immediate
    [5, 60, 0, 60], // the receiver asks for longer: honoured
    [300, 60, 0, 300], // never earlier than the schedule's step
    [300, 60, 0.5, 315],
    [5, 86_400, 0.3, 3_600], // bounded to an hour
    [7_200, 86_400, 0, 7_200], // a longer step of the schedule itself is kept
  ])("step %s, Retry-After %s, random %s → %s", (scheduledSeconds, retryAfterSeconds, random, expected) => {
    expect(retryDelaySeconds({ scheduledSeconds, retryAfterSeconds, random })).toBe(expected);
  });

  it("spreads endpoints that failed together over the step's tenth, its end included", () => {
    // Evenly spread draws, not Math.random: a draw just under 1 rounds to the tenth itself (66 s),
    // which a random sample reaches only now and then.
    const draws = [...Array.from({ length: 200 }, (_, i) => i / 200), 1 - Number.EPSILON];
    const delays = draws.map((random) =>
      retryDelaySeconds({ scheduledSeconds: 60, retryAfterSeconds: undefined, random }),
    );
    expect(Math.min(...delays)).toBe(60);
    expect(Math.max(...delays)).toBe(66);
    expect(new Set(delays).size).toBeGreaterThan(100);
  });
});
