import { describe, expect, it } from "vitest";
import { createBatcher } from "./batcher.ts";

/** A batcher whose batches wait until released, recording what each batch held. */
function recordingBatcher(options: { maxBatch?: number; maxInFlight?: number } = {}) {
  const batches: string[][] = [];
  const releases: (() => void)[] = [];
  const submit = createBatcher<string, string>(
    async (requests) => {
      batches.push(requests);
      await new Promise<void>((resolve) => releases.push(resolve));
      if (requests.includes("day1:fail")) throw new Error("batch failed");
      return requests.map((request) => `done ${request}`);
    },
    {
      maxBatch: options.maxBatch ?? 64,
      maxInFlight: options.maxInFlight ?? 1,
      keyOf: (request) => request.split(":")[0]!,
    },
  );
  const turn = () => new Promise((resolve) => setImmediate(resolve));
  const releaseNext = async () => {
    await turn();
    releases.shift()?.();
    await turn();
  };
  return { submit, batches, releaseNext, turn };
}

describe("createBatcher", () => {
  it("sends a lone call on the next turn, and coalesces the calls that arrive while a batch is out", async () => {
    const { submit, batches, releaseNext, turn } = recordingBatcher();
    const first = submit("day1:a");
    await turn();
    expect(batches).toEqual([["day1:a"]]);
    const later = ["day1:b", "day1:c", "day1:d"].map((request) => submit(request));
    await releaseNext();
    expect(await first).toBe("done day1:a");
    await releaseNext();
    expect(await Promise.all(later)).toEqual(["done day1:b", "done day1:c", "done day1:d"]);
    expect(batches).toEqual([["day1:a"], ["day1:b", "day1:c", "day1:d"]]);
  });

  it("keeps a batch to one key and to maxBatch calls, batches in arrival order", async () => {
    const { submit, batches, releaseNext } = recordingBatcher({ maxBatch: 2 });
    const all = ["day1:a", "day1:b", "day1:c", "day2:x", "day1:d"].map((request) => submit(request));
    for (let i = 0; i < 4; i++) await releaseNext();
    await Promise.all(all);
    expect(batches).toEqual([["day1:a", "day1:b"], ["day1:c"], ["day2:x"], ["day1:d"]]);
  });

  it("runs at most maxInFlight batches at once", async () => {
    const { submit, batches, releaseNext, turn } = recordingBatcher({ maxBatch: 1, maxInFlight: 2 });
    const all = ["day1:a", "day1:b", "day1:c"].map((request) => submit(request));
    await turn();
    expect(batches).toEqual([["day1:a"], ["day1:b"]]);
    await releaseNext();
    expect(batches).toEqual([["day1:a"], ["day1:b"], ["day1:c"]]);
    await releaseNext();
    await releaseNext();
    expect(await Promise.all(all)).toEqual(["done day1:a", "done day1:b", "done day1:c"]);
  });

  it("rejects every call of a batch that throws, and goes on with the next batch", async () => {
    const { submit, releaseNext } = recordingBatcher();
    const first = submit("day1:a");
    await releaseNext();
    await first;
    const failing = [submit("day1:fail"), submit("day1:b")].map((call) =>
      call.then(
        (result) => result,
        (error: Error) => error.message,
      ),
    );
    await releaseNext();
    expect(await Promise.all(failing)).toEqual(["batch failed", "batch failed"]);
    const after = submit("day1:c");
    await releaseNext();
    expect(await after).toBe("done day1:c");
  });
});
