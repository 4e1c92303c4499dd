import { describe, expect, it } from "vitest";
import { OpenCeremonies } from "./ceremonies.ts";

// The open ceremonies' bounds, in memory with a clock of the test's own: which challenges are
// still open after each client opened its own.

type Case = {
  name: string;
  max: number;
  perClient: number;
  /** [challenge, client] in the order opened, one millisecond apart. */
  opened: Array<[string, string]>;
  open: string[];
};

const cases: Case[] = [
  {
    name: "a client past its share loses its own oldest, not another's",
    max: 10,
    perClient: 2,
    opened: [
      ["operator", "a"],
      ["x1", "b"],
      ["x2", "b"],
      ["x3", "b"],
    ],
    open: ["operator", "x2", "x3"],
  },
  {
    name: "all taken: the oldest of the client holding the most goes",
    max: 4,
    perClient: 3,
    opened: [
      ["operator", "a"],
      ["x1", "b"],
      ["x2", "b"],
      ["y1", "c"],
      ["y2", "c"],
    ],
    open: ["operator", "x2", "y1", "y2"],
  },
  {
    name: "a flood from several clients, each at its share, leaves a lone client's one",
    max: 6,
    perClient: 2,
    opened: [
      ["operator", "a"],
      ...Array.from({ length: 12 }, (_, i) => [`x${i}`, `flood${i % 4}`] as [string, string]),
    ],
    open: ["operator", "x7", "x8", "x9", "x10", "x11"],
  },
  {
    name: "every client holding one: the oldest goes",
    max: 2,
    perClient: 2,
    opened: [
      ["first", "a"],
      ["second", "b"],
      ["third", "c"],
    ],
    open: ["second", "third"],
  },
];

describe("OpenCeremonies", () => {
  for (const each of cases) {
    it(each.name, () => {
      let now = 0;
      const ceremonies = new OpenCeremonies<true>(60_000, each.max, each.perClient, () => now);
      for (const [challenge, client] of each.opened) {
        now += 1;
        ceremonies.open(challenge, true, client);
      }
      const all = each.opened.map(([challenge]) => challenge);
      expect(all.filter((challenge) => ceremonies.get(challenge) !== undefined)).toEqual(each.open);
    });
  }

  it("a challenge is spent once and expires with its time; a spent one frees its client's share", () => {
    let now = 0;
    const ceremonies = new OpenCeremonies<string>(1_000, 10, 1, () => now);
    ceremonies.open("c1", "alice", "a");
    ceremonies.spend("c1");
    expect(ceremonies.get("c1")).toBeUndefined();
    ceremonies.open("c2", "alice", "a");
    expect(ceremonies.get("c2")).toBe("alice");
    now += 1_000;
    expect(ceremonies.get("c2")).toBeUndefined();
  });
});
