import { describe, expect, it } from "vitest";
import { Batcher } from "./batcher.ts";

/** A batcher whose batches wait until released, recording what each batch held. */
function recordingBatcher(maxBatch = 64) {
  const batches: string[][] = [];
  const releases: (() => void)[] = [];
  const batcher = new Batcher<string, string>({
    maxBatch,
    keyOf: (request) => request.split(":")[0]!,
    run: async (requests) => {
      batches.push(requests);
      await new Promise<void>((resolve) => releases.push(resolve));
      if (requests.includes("day1:fail")) throw new Error("batch failed");
      return requests.map((request) => `done ${request}`);
    },
  });
  const releaseNext = async () => {
    await new Promise((resolve) => setImmediate(resolve));
    releases.shift()?.();
  };
  return { batcher, batches, releaseNext };
}

describe("Batcher", () => {
  it("sends a lone call at once, and coalesces the calls that arrive while a batch is out", async () => {
    const { batcher, batches, releaseNext } = recordingBatcher();
    const first = batcher.submit("day1:a");
    expect(batches).toEqual([["day1:a"]]);
    const later = ["day1:b", "day1:c", "day1:d"].map((request) => batcher.submit(request));
    await releaseNext();
    expect(await first).toBe("done day1:a");
    await releaseNext();
    expect(await Promise.all(later)).toEqual(["done day1:b", "done day1:c", "done day1:d"]);
    expect(batches).toEqual([["day1:a"], ["day1:b", "day1:c", "day1:d"]]);
  });

  it("keeps batches to one key and to maxBatch calls, in arrival order", async () => {
    const { batcher, batches, releaseNext } = recordingBatcher(2);
    const all = ["day1:a", "day1:b", "day2:x", "day1:c", "day1:d"].map((request) => batcher.submit(request));
    for (let i = 0; i < 4; i++) await releaseNext();
    await Promise.all(all);
    expect(batches).toEqual([["day1:a"], ["day1:b", "day1:c"], ["day2:x"], ["day1:d"]]);
  });

  it("rejects every call of a batch that throws, and goes on with the next batch", async () => {
    const { batcher, releaseNext } = recordingBatcher();
    const first = batcher.submit("day1:a");
    const failing = [batcher.submit("day1:fail"), batcher.submit("day1:b")];
    await releaseNext();
    await first;
    await releaseNext();
    for (const call of failing) await expect(call).rejects.toThrow("batch failed");
    const after = batcher.submit("day1:c");
    await releaseNext();
    expect(await after).toBe("done day1:c");
  });
});
