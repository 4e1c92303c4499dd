import { describe, expect, it } from "vitest";
import { SlidingWindowLimiter } from "./rate-limiter.ts";

function clockAt(startMs: number): { now: () => number; advance: (ms: number) => void } {
  let current = startMs;
  return { now: () => current, advance: (ms) => (current += ms) };
}

describe("SlidingWindowLimiter", () => {
  it("allows `limit` events in the window and refuses the next with a Retry-After", () => {
    const clock = clockAt(1_000_000);
    const limiter = new SlidingWindowLimiter({ limit: 3, windowSeconds: 60, now: clock.now });
    expect([1, 2, 3].map(() => limiter.consume("a").allowed)).toEqual([true, true, true]);
    expect(limiter.consume("a")).toEqual({ allowed: false, retryAfterSeconds: 60 });
    expect(limiter.consume("b").allowed).toBe(true);
  });

  it("slides: events leave one at a time as their second leaves the window", () => {
    const clock = clockAt(0);
    const limiter = new SlidingWindowLimiter({ limit: 2, windowSeconds: 10, now: clock.now });
    limiter.consume("k");
    clock.advance(4_000);
    limiter.consume("k");
    expect(limiter.consume("k")).toEqual({ allowed: false, retryAfterSeconds: 6 });
    clock.advance(6_000); // the first event is now 10 s old
    expect(limiter.consume("k").allowed).toBe(true);
    expect(limiter.consume("k")).toEqual({ allowed: false, retryAfterSeconds: 4 });
  });

  it("does not reset at a fixed boundary: a burst across it still counts as one window", () => {
    const clock = clockAt(59_500);
    const limiter = new SlidingWindowLimiter({ limit: 600, windowSeconds: 60, now: clock.now });
    for (let i = 0; i < 300; i++) limiter.consume("agent");
    clock.advance(1_000); // crosses a whole-minute boundary
    for (let i = 0; i < 300; i++) expect(limiter.consume("agent").allowed).toBe(true);
    expect(limiter.consume("agent").allowed).toBe(false);
  });

  it("counts without consuming on peek, and records unconditionally", () => {
    const limiter = new SlidingWindowLimiter({ limit: 1, windowSeconds: 60 });
    expect(limiter.peek("ip").allowed).toBe(true);
    limiter.record("ip");
    limiter.record("ip");
    expect(limiter.peek("ip").allowed).toBe(false);
  });

  it("keeps memory bounded under many keys, dropping the least recently touched", () => {
    const limiter = new SlidingWindowLimiter({ limit: 1, windowSeconds: 60, maxKeys: 1_000 });
    limiter.consume("hot");
    for (let i = 0; i < 5_000; i++) {
      limiter.consume(`ip-${i}`);
      if (i % 100 === 0) limiter.record("hot");
    }
    expect(limiter.size).toBe(1_000);
    expect(limiter.peek("hot").allowed).toBe(false);
    expect(limiter.peek("ip-0").allowed).toBe(true);
  });

  it("snapshots the most recently active keys with their counts", () => {
    let now = 1_000_500;
    const limiter = new SlidingWindowLimiter({ limit: 10, windowSeconds: 60, now: () => now });
    limiter.consume("a");
    now += 2_000;
    limiter.consume("b");
    limiter.consume("b");
    expect(limiter.snapshot(200)).toEqual([
      { key: "b", count: 2, lastSecond: 1002 },
      { key: "a", count: 1, lastSecond: 1000 },
    ]);
    expect(limiter.snapshot(1)).toHaveLength(1);
    // "a" leaves the window, "b" is still in it, "c" is new.
    now += 59_000;
    limiter.consume("c");
    expect(limiter.snapshot(200)).toEqual([
      { key: "c", count: 1, lastSecond: 1061 },
      { key: "b", count: 2, lastSecond: 1002 },
    ]);
  });
});
