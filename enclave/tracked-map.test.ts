import { describe, expect, it } from "vitest";
import { recordingChanges, TrackedMap } from "./tracked-map.ts";

const touched = (map: TrackedMap<string, unknown>): string[] => [...map.takeChanges().touched].sort();

describe("TrackedMap (what a commit's change touched)", () => {
  it("notes each key a change sets, deletes or reads, and nothing outside a change", () => {
    const map = TrackedMap.of<string, { count: number }>([
      ["a", { count: 1 }],
      ["b", { count: 1 }],
      ["c", { count: 1 }],
    ]);
    map.set("z", { count: 0 });
    map.get("a");
    expect(touched(map)).toEqual([]);
    recordingChanges(() => {
      map.set("d", { count: 1 });
      map.delete("b");
      // A value read may be changed in place.
      map.get("c")!.count += 1;
      map.has("a");
    });
    expect(touched(map)).toEqual(["b", "c", "d"]);
    expect(touched(map)).toEqual([]);
  });

  it("notes every key an iteration hands out, whichever way it iterates", () => {
    const map = TrackedMap.of([
      ["a", 1],
      ["b", 2],
    ]);
    const iterations: Array<() => void> = [
      () => [...map],
      () => [...map.entries()],
      () => [...map.values()],
      () => map.forEach(() => {}),
    ];
    for (const iterate of iterations) {
      recordingChanges(iterate);
      expect(touched(map)).toEqual(["a", "b"]);
    }
    recordingChanges(() => [...map.keys()]);
    expect(touched(map)).toEqual([]);
  });

  it("says it was emptied, until the next take", () => {
    const map = TrackedMap.of([["a", 1]]);
    recordingChanges(() => {
      map.clear();
      map.set("b", 2);
    });
    expect(map.takeChanges()).toEqual({ cleared: true, touched: new Set(["b"]) });
    expect(map.takeChanges()).toEqual({ cleared: false, touched: new Set() });
  });
});
