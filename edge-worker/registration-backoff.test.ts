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
  // One machine holds one IPv6 address per interface here, so a client moving through its /64 is
  // shown on the class itself, not through Miniflare: the addresses are what CF-Connecting-IP says.
  it("holds an IPv6 client's refusal for its whole /64, as the origin counts it: another address of it is refused, another /64 goes on", () => {
    const backoff = new RegistrationBackoff(() => 0);
    backoff.observe("2a00:1450:4001:77::1", answer(429, "30"));
    for (const sameGroup of [
      "2a00:1450:4001:77::2",
      "2a00:1450:4001:77:ffff:1:2:3",
      "2A00:1450:4001:0077:0:0:0:9",
    ]) {
      expect(backoff.secondsLeft(sameGroup), sameGroup).toBe(30);
    }
    expect(backoff.secondsLeft("2a00:1450:4001:78::1")).toBeUndefined();
  });

  it("never merges addresses the origin counts apart: IPv4, IPv4-mapped, NAT64 and others of ::/64 each by itself", () => {
    const backoff = new RegistrationBackoff(() => 0);
    for (const address of ["81.2.0.1", "::ffff:81.2.0.2", "64:ff9b::5102:3", "::5102:4"]) {
      backoff.observe(address, answer(429, "30"));
    }
    for (const other of ["81.2.0.9", "::ffff:81.2.0.9", "64:ff9b::5102:9", "::5102:9", "64:ff9b::1:2"]) {
      expect(backoff.secondsLeft(other), other).toBeUndefined();
    }
  });
});
