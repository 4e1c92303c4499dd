import { describe, expect, it } from "vitest";
import { LOCKOUT_ALLOWANCE, LockoutAllowance } from "./lockout-allowance.ts";

// The reads past an address's failure limit for ids that have not worked from it
// (lockout-allowance.ts); bearer-auth.int.test.ts runs them against the real store.

describe("LockoutAllowance", () => {
  it("admits 3 first sights and 6 ids that come back per address a minute; a spent id waits out the minute", () => {
    let now = Date.parse("2032-06-01T00:00:00Z");
    const allowance = new LockoutAllowance({ now: () => now });
    const source = "198.18.6.1";
    const ids = Array.from({ length: 12 }, (_, i) => `id${i}`);
    expect(ids.map((id) => allowance.admit(source, id))).toEqual([
      ...Array(3).fill({ admitted: true, lane: "first_sight" }),
      ...Array(9).fill({ admitted: false, retryAfterSeconds: 1 }),
    ]);
    // Another address has lanes of its own.
    expect(allowance.admit("198.18.6.2", "id0")).toEqual({ admitted: true, lane: "first_sight" });
    now += 1_000;
    const back = ids.slice(3).map((id) => allowance.admit(source, id));
    expect(back.filter((decision) => decision.admitted)).toHaveLength(6);
    expect(back.slice(0, 6)).toEqual(Array(6).fill({ admitted: true, lane: "come_back" }));
    expect(back[6]).toMatchObject({ admitted: false });
    // An id read and failed is not read again from there this minute.
    allowance.failed(source, "id3");
    now += 59_000;
    expect(allowance.admit(source, "id3")).toEqual({ admitted: false, retryAfterSeconds: 1 });
    now += 1_000;
    expect(allowance.admit(source, "id3")).toEqual({ admitted: true, lane: "first_sight" });
  });

  it("keeps a bounded number of ids, the least recently touched dropped first", () => {
    const allowance = new LockoutAllowance({ maxEntries: 4, firstSight: 0 });
    for (let i = 0; i < 10; i++) allowance.admit("198.18.6.3", `junk${i}`);
    expect(allowance.size).toBe(4);
  });

  it("takes an id the edge told to come back into the come-back lane, though it never saw the id", () => {
    const allowance = new LockoutAllowance({ firstSight: 0 });
    const source = "198.18.6.4";
    expect(allowance.admit(source, "fresh")).toEqual({ admitted: false, retryAfterSeconds: 1 });
    expect(allowance.admit(source, "told-by-the-edge", true)).toEqual({ admitted: true, lane: "come_back" });
    for (let i = 0; i < LOCKOUT_ALLOWANCE.comeBack - 1; i++) allowance.admit(source, `back${i}`, true);
    expect(allowance.admit(source, "one-too-many", true)).toMatchObject({ admitted: false });
  });
});
