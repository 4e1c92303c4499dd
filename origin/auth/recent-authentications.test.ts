import { describe, expect, it } from "vitest";
import { RecentAuthentications } from "./recent-authentications.ts";

describe("RecentAuthentications", () => {
  it("forgets a pair after the window, and keeps a bounded number, the least recently seen dropped first", () => {
    let now = Date.parse("2032-06-01T00:00:00Z");
    const recent = new RecentAuthentications({ windowSeconds: 60, maxEntries: 3, now: () => now });
    recent.remember("198.18.2.1", "a");
    now += 59_000;
    expect(recent.has("198.18.2.1", "a")).toBe(true);
    expect(recent.has("198.18.2.2", "a")).toBe(false);
    now += 1_000;
    expect(recent.has("198.18.2.1", "a")).toBe(false);
    for (const id of ["b", "c", "d", "b", "e"]) recent.remember("198.18.2.1", id);
    // The least recently seen goes first: c (d, b and e were seen since).
    expect(recent.size).toBe(3);
    expect(["b", "c", "d", "e"].map((id) => recent.has("198.18.2.1", id))).toEqual([true, false, true, true]);
  });
});
