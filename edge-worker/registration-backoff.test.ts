import { describe, expect, it } from "vitest";
import { REMEMBER_AT_MOST_MS, REMEMBERED_ADDRESSES, RegistrationBackoff } from "./registration-backoff.ts";

// What the edge remembers of the origin's 429s (the worker's behaviour end to end is in
// register.int.test.ts); a clock of the test's own, since the longest wait is a minute.

const answer = (status: number, retryAfter?: string): Response =>
  new Response(null, { status, headers: retryAfter === undefined ? {} : { "retry-after": retryAfter } });

describe("RegistrationBackoff", () => {
  it("remembers a 429 until its Retry-After, counting down in whole seconds, then forgets it", () => {
    let now = 1_000_000;
    const backoff = new RegistrationBackoff(() => now);
    backoff.observe("192.0.2.1", answer(429, "3"));
    expect(backoff.secondsLeft("192.0.2.1")).toBe(3);
    expect(backoff.secondsLeft("192.0.2.2")).toBeUndefined();
    now += 2_100;
    expect(backoff.secondsLeft("192.0.2.1")).toBe(1);
    now += 900;
    expect(backoff.secondsLeft("192.0.2.1")).toBeUndefined();
  });

  it("remembers a spent day's quota a minute at most, so a raised quota reaches the edge within one, naming the origin's wait meanwhile", () => {
    let now = 0;
    const backoff = new RegistrationBackoff(() => now);
    backoff.observe("192.0.2.1", answer(429, String(20 * 3600)));
    expect(backoff.secondsLeft("192.0.2.1")).toBe(20 * 3600);
    now += REMEMBER_AT_MOST_MS - 1_000;
    expect(backoff.secondsLeft("192.0.2.1")).toBe(20 * 3600 - REMEMBER_AT_MOST_MS / 1_000 + 1);
    now += 1_000;
    expect(backoff.secondsLeft("192.0.2.1")).toBeUndefined();
  });

  it("remembers nothing of an answer other than a 429 with a wait in whole seconds", () => {
    const backoff = new RegistrationBackoff(() => 0);
    const answers = [answer(201), answer(503, "5"), answer(429), answer(429, "0"), answer(429, "-4")];
    answers.push(answer(429, "1.5"), answer(429, "Wed, 21 Oct 2026 07:28:00 GMT"));
    for (const [i, each] of answers.entries()) backoff.observe(`192.0.2.${i}`, each);
    for (const i of answers.keys()) expect(backoff.secondsLeft(`192.0.2.${i}`), String(i)).toBeUndefined();
  });

  it(`holds ${REMEMBERED_ADDRESSES} addresses at most, forgetting the oldest first`, () => {
    const backoff = new RegistrationBackoff(() => 0);
    for (let i = 0; i <= REMEMBERED_ADDRESSES; i++) backoff.observe(`a${i}`, answer(429, "30"));
    expect(backoff.secondsLeft("a0")).toBeUndefined();
    expect(backoff.secondsLeft("a1")).toBe(30);
    expect(backoff.secondsLeft(`a${REMEMBERED_ADDRESSES}`)).toBe(30);
  });
});
