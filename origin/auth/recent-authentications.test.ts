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

  it("remembers one token at no more than its cap of addresses, its least recently seen dropped first", () => {
    // Mutation: remember() without the per-token cap keeps all 20 addresses of the one token.
    const recent = new RecentAuthentications({ maxSourcesPerToken: 16 });
    for (let i = 0; i < 20; i++) recent.remember(`198.18.3.${i}`, "roaming");
    recent.remember("198.18.4.1", "settled");
    expect(recent.size).toBe(17);
    expect(Array.from({ length: 20 }, (_, i) => recent.has(`198.18.3.${i}`, "roaming"))).toEqual([
      ...Array(4).fill(false),
      ...Array(16).fill(true),
    ]);
    // Seen again, an address moves to the back of its token's queue.
    recent.remember("198.18.3.4", "roaming");
    recent.remember("198.18.3.99", "roaming");
    expect([recent.has("198.18.3.4", "roaming"), recent.has("198.18.3.5", "roaming")]).toEqual([true, false]);
    expect(recent.has("198.18.4.1", "settled")).toBe(true);
  });

  it("moves the time of a pair seen again right after itself, and re-inserts a pair forgotten since", () => {
    let now = Date.parse("2032-06-01T00:00:00Z");
    const recent = new RecentAuthentications({ windowSeconds: 60, maxSourcesPerToken: 2, now: () => now });
    recent.remember("198.18.6.1", "a");
    now += 50_000;
    recent.remember("198.18.6.1", "a");
    now += 20_000;
    // 70 s after the first success, 20 s after the second: still within the window.
    expect(recent.has("198.18.6.1", "a")).toBe(true);
    recent.forget("198.18.6.1", "a");
    recent.remember("198.18.6.1", "a");
    recent.remember("198.18.6.2", "a");
    recent.remember("198.18.6.3", "a");
    // The cap of two addresses counts the pair remembered again: its address is the oldest.
    expect(["198.18.6.1", "198.18.6.2", "198.18.6.3"].map((source) => recent.has(source, "a"))).toEqual([
      false,
      true,
      true,
    ]);
  });

  it("forgets a pair that failed, and keeps its token's other addresses", () => {
    const recent = new RecentAuthentications();
    recent.remember("198.18.5.1", "a");
    recent.remember("198.18.5.2", "a");
    recent.forget("198.18.5.1", "a");
    expect([recent.has("198.18.5.1", "a"), recent.has("198.18.5.2", "a")]).toEqual([false, true]);
    expect(recent.size).toBe(1);
  });

  it("names the tokens that worked from an address within the window, none past its bound", () => {
    let now = Date.parse("2032-06-01T00:00:00Z");
    const recent = new RecentAuthentications({ windowSeconds: 60, maxEntries: 6, now: () => now });
    expect(recent.tokensFrom("198.18.7.1", 3)).toEqual([]);
    recent.remember("198.18.7.1", "a");
    now += 30_000;
    recent.remember("198.18.7.1", "b");
    recent.remember("198.18.7.2", "c");
    recent.remember("198.18.7.1", "a");
    expect(recent.tokensFrom("198.18.7.1", 3)?.sort()).toEqual(["a", "b"]);
    // Forgotten after a failure, out of the window, or dropped for room: no longer named.
    recent.forget("198.18.7.1", "a");
    expect(recent.tokensFrom("198.18.7.1", 3)).toEqual(["b"]);
    now += 60_000;
    recent.remember("198.18.7.1", "d");
    expect(recent.tokensFrom("198.18.7.1", 3)).toEqual(["d"]);
    for (const id of ["e", "f", "g", "h", "i"]) recent.remember("198.18.7.3", id);
    expect(recent.tokensFrom("198.18.7.1", 3)).toEqual(["d"]);
    expect(recent.tokensFrom("198.18.7.2", 3)).toEqual([]);
    // More than the bound: none named at all.
    expect(recent.tokensFrom("198.18.7.3", 3)).toBeUndefined();
    expect(recent.tokensFrom("198.18.7.3", 5)?.sort()).toEqual(["e", "f", "g", "h", "i"]);
    // The bound counts only the tokens still remembered there.
    recent.forget("198.18.7.3", "e");
    recent.forget("198.18.7.3", "f");
    expect(recent.tokensFrom("198.18.7.3", 3)?.sort()).toEqual(["g", "h", "i"]);
  });
});
