import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { atMostEvery } from "./loop.ts";

describe("atMostEvery", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("calls at once, then folds the calls of each gap into one at its end", () => {
    const calls: number[] = [];
    const wake = atMostEvery(100, () => calls.push(performance.now()));
    const start = performance.now();
    wake();
    expect(calls).toHaveLength(1);
    // 50 calls within the gap: one more call, when the gap ends.
    for (let i = 0; i < 50; i++) {
      vi.advanceTimersByTime(1);
      wake();
    }
    expect(calls).toHaveLength(1);
    vi.advanceTimersByTime(100);
    expect(calls).toHaveLength(2);
    expect(calls[1]! - start).toBeGreaterThanOrEqual(100);
    // Quiet for longer than the gap: the next call is at once again.
    vi.advanceTimersByTime(500);
    wake();
    expect(calls).toHaveLength(3);
  });

  it("cancel drops the folded call", () => {
    let calls = 0;
    const wake = atMostEvery(100, () => calls++);
    wake();
    wake();
    wake.cancel();
    vi.advanceTimersByTime(1_000);
    expect(calls).toBe(1);
  });
});
