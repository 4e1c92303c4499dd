import { describe, expect, it } from "vitest";
import { slowestModules } from "./slowest-files-reporter.ts";

describe("the slowest-files list at the end of a CI run", () => {
  it("lists the longest files first, in seconds, and no more than asked", () => {
    const modules = [
      { path: "a.test.ts", duration: 1_250 },
      { path: "fuzz.int.test.ts", duration: 131_400 },
      { path: "b.test.ts", duration: 40 },
    ];
    expect(slowestModules(modules, 2)).toEqual(["  131.4 s  fuzz.int.test.ts", "    1.3 s  a.test.ts"]);
  });
});
