import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RecencyMap } from "./recency-map.ts";

const entries = <K, V>(map: RecencyMap<K, V>): [K, V][] =>
  [...map.newestFirst()].map(({ key, value }) => [key, value]);

describe("RecencyMap", () => {
  it("keeps keys in the order they were last set; get and has leave the order alone", () => {
    const map = new RecencyMap<string, number>();
    map.set("a", 1);
    map.set("b", 2);
    map.set("c", 3);
    expect(map.get("a")).toBe(1);
    expect(map.has("a")).toBe(true);
    expect(entries(map)).toEqual([
      ["c", 3],
      ["b", 2],
      ["a", 1],
    ]);
    map.set("a", 10);
    expect(entries(map)).toEqual([
      ["a", 10],
      ["c", 3],
      ["b", 2],
    ]);
    expect(map.oldest()).toMatchObject({ key: "b", value: 2 });
    expect(map.newestKey()).toBe("a");
  });

  it("touch makes a key the most recent and answers its value; an absent key changes nothing", () => {
    const map = new RecencyMap<string, number>();
    map.set("a", 1);
    map.set("b", 2);
    expect(map.touch("a")).toBe(1);
    expect(map.newestKey()).toBe("a");
    expect(map.touch("z")).toBeUndefined();
    expect(map.size).toBe(2);
    expect(entries(map)).toEqual([
      ["a", 1],
      ["b", 2],
    ]);
  });

  it("shift removes the least recently set entry, down to an empty map", () => {
    const map = new RecencyMap<string, number>();
    for (const [index, key] of ["a", "b", "c"].entries()) map.set(key, index);
    map.touch("a");
    expect(map.shift()).toMatchObject({ key: "b" });
    expect(map.shift()).toMatchObject({ key: "c" });
    expect(map.shift()).toMatchObject({ key: "a" });
    expect(map.shift()).toBeUndefined();
    expect(map.size).toBe(0);
    expect(map.oldest()).toBeUndefined();
    expect(map.newestKey()).toBeUndefined();
    map.set("d", 4);
    expect(entries(map)).toEqual([["d", 4]]);
  });

  it("answers as a Map kept in order by deleting and setting again, over random operations", () => {
    const key = fc.constantFrom("a", "b", "c", "d", "e", "f");
    const operation = fc.oneof(
      fc.record({ op: fc.constant("set" as const), key, value: fc.integer() }),
      fc.record({ op: fc.constantFrom("touch" as const, "delete" as const, "get" as const), key }),
      fc.record({ op: fc.constant("shift" as const) }),
    );
    fc.assert(
      fc.property(fc.array(operation, { maxLength: 60 }), (operations) => {
        const map = new RecencyMap<string, number>();
        // The model: a Map whose insertion order is the recency order.
        const model = new Map<string, number>();
        for (const step of operations) {
          if (step.op === "set") {
            model.delete(step.key);
            model.set(step.key, step.value);
            map.set(step.key, step.value);
          } else if (step.op === "touch") {
            const value = model.get(step.key);
            if (value !== undefined) {
              model.delete(step.key);
              model.set(step.key, value);
            }
            expect(map.touch(step.key)).toBe(value);
          } else if (step.op === "delete") {
            expect(map.delete(step.key)).toBe(model.delete(step.key));
          } else if (step.op === "get") {
            expect(map.get(step.key)).toBe(model.get(step.key));
          } else {
            const oldest = model.keys().next();
            if (!oldest.done) model.delete(oldest.value);
            expect(map.shift()?.key).toBe(oldest.done ? undefined : oldest.value);
          }
          expect(map.size).toBe(model.size);
          expect(entries(map)).toEqual([...model].reverse());
          expect(map.oldest()?.key).toBe(model.keys().next().value);
        }
      }),
      { numRuns: 300 },
    );
  });
});
