import { describe, expect, it } from "vitest";
import { EarlyLimiter, REMEMBERED_LIMITS_MS } from "./early-limiter.ts";

const GROUP = "a".repeat(64);
const OTHER = "b".repeat(64);

function limiterAt(start = 1_000_000) {
  const time = { now: start };
  return { time, limiter: new EarlyLimiter(() => time.now) };
}

describe("EarlyLimiter.refuseBeforeRead", () => {
  it("refuses a group past the limits it was last given, for under a second, counting nothing", () => {
    const { time, limiter } = limiterAt();
    const limits = { perIpGroup: 2, global: 100 };
    expect(limiter.refuseBeforeRead(GROUP)).toBeUndefined(); // no limits read yet
    expect(limiter.consume(GROUP, limits)).toEqual({ allowed: true });
    expect(limiter.refuseBeforeRead(GROUP)).toBeUndefined(); // room for one more
    expect(limiter.consume(GROUP, limits)).toEqual({ allowed: true });
    const refused = limiter.refuseBeforeRead(GROUP);
    expect(refused).toMatchObject({ allowed: false });
    expect(refused!.retryAfterSeconds).toBeGreaterThan(0);
    // Another group is judged on its own window (and the node's, which has room).
    expect(limiter.refuseBeforeRead(OTHER)).toBeUndefined();
    // Nothing was counted by the refusals: the group still holds its two attempts.
    expect(limiter.snapshot(10).find((bucket) => bucket.key === GROUP)?.count).toBe(2);
    // A second on, the limits are stale: the request goes on to read the policy.
    time.now += REMEMBERED_LIMITS_MS;
    expect(limiter.refuseBeforeRead(GROUP)).toBeUndefined();
  });

  it("refuses every group once the node's window is full", () => {
    const { limiter } = limiterAt();
    const limits = { perIpGroup: 10, global: 2 };
    limiter.consume(GROUP, limits);
    limiter.consume(OTHER, limits);
    expect(limiter.refuseBeforeRead("c".repeat(64))).toMatchObject({ allowed: false });
  });

  it("a raised limit, once read, lets the group in; a lowered one refuses at once", () => {
    const { limiter } = limiterAt();
    limiter.consume(GROUP, { perIpGroup: 1, global: 100 });
    expect(limiter.refuseBeforeRead(GROUP)).toMatchObject({ allowed: false });
    // The policy read with a raised limit (the request that read it consumes under it).
    expect(limiter.consume(GROUP, { perIpGroup: 3, global: 100 })).toEqual({ allowed: true });
    expect(limiter.refuseBeforeRead(GROUP)).toBeUndefined();
    // Lowered: the next consume judges by it, whatever was remembered.
    expect(limiter.consume(GROUP, { perIpGroup: 2, global: 100 })).toMatchObject({ allowed: false });
    expect(limiter.refuseBeforeRead(GROUP)).toMatchObject({ allowed: false });
  });
});
