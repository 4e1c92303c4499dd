import { describe, expect, it } from "vitest";
import { HourlyCounts } from "./hourly-counts.ts";

const at = (text: string): Date => new Date(text);

describe("HourlyCounts", () => {
  it("counts each label in its UTC hour and reads the last hours oldest first, empty ones as {}", () => {
    const counts = new HourlyCounts<"a" | "b">(3);
    counts.add("a", at("2031-05-06T08:59:59.999Z"));
    counts.add("a", at("2031-05-06T09:00:00.000Z"));
    counts.add("b", at("2031-05-06T09:30:00.000Z"));
    counts.add("a", at("2031-05-06T09:59:59.000Z"));
    expect(counts.read(at("2031-05-06T10:15:00Z"))).toEqual([
      { start: at("2031-05-06T08:00:00Z"), counts: { a: 1 } },
      { start: at("2031-05-06T09:00:00Z"), counts: { a: 2, b: 1 } },
      { start: at("2031-05-06T10:00:00Z"), counts: {} },
    ]);
  });

  it("drops the hours that left the window, so what it holds stays bounded", () => {
    const counts = new HourlyCounts<"a">(2);
    counts.add("a", at("2031-05-06T07:10:00Z"));
    counts.add("a", at("2031-05-06T08:10:00Z"));
    counts.add("a", at("2031-05-06T09:10:00Z"));
    // Read back at 08:xx, the 07:00 hour would be in the window, had it been kept.
    expect(counts.read(at("2031-05-06T08:30:00Z"))).toEqual([
      { start: at("2031-05-06T07:00:00Z"), counts: {} },
      { start: at("2031-05-06T08:00:00Z"), counts: { a: 1 } },
    ]);
  });
});
