import { describe, expect, it } from "vitest";
import { refusalFieldsToStore, replayedRefusalFields } from "./refusal-fields.ts";

// What a final refusal stores of its fields, and what a repeat of its key answers from them
// (docs/agents.md#moving-money). The integration tests (actions/faucet.int.test.ts,
// actions/transfers.int.test.ts) show the same through the real stack.

const answeredAt = new Date("2026-12-05T10:00:00.000Z");
const later = (ms: number): Date => new Date(answeredAt.getTime() + ms);

describe("refusal fields, stored and replayed", () => {
  it("stores the fields in the answer's order, a wait as the instant it names", () => {
    expect(
      refusalFieldsToStore(
        { needed_units: "5", available_units: "4", needed_wei: "5000000000000", available_wei: "4" },
        answeredAt,
      ),
    ).toEqual([
      ["needed_units", "5"],
      ["available_units", "4"],
      ["needed_wei", "5000000000000"],
      ["available_wei", "4"],
    ]);
    expect(refusalFieldsToStore({ retry_after: 42 }, answeredAt)).toEqual([
      ["retry_at", "2026-12-05T10:00:42.000Z"],
    ]);
    // A refusal without fields stores an empty list: null is for the rows ended before the column.
    expect(refusalFieldsToStore(undefined, answeredAt)).toEqual([]);
  });

  it("replays the fields as stored, in their order, with no header when there is no wait", () => {
    // Not in the order of their lengths, which a jsonb object would have put them in.
    const figures = { needed_units: "5", available_units: "4", needed_wei: "5", available_wei: "4" };
    const stored = refusalFieldsToStore(figures, answeredAt);
    const replayed = replayedRefusalFields(JSON.parse(JSON.stringify(stored)), later(3_600_000));
    expect(replayed).toEqual({ fields: figures, headers: {} });
    expect(Object.keys(replayed!.fields)).toEqual(Object.keys(figures));
  });

  const waits: Array<[string, number, number, Record<string, string>]> = [
    // [case, ms after the first answer, retry_after answered, headers]
    ["at once: the first answer's figure", 0, 60, { "Retry-After": "60" }],
    ["a little later: rounded up, as the first answer rounded", 1, 60, { "Retry-After": "60" }],
    ["counted down", 30_000, 30, { "Retry-After": "30" }],
    ["the last part of a second", 59_500, 1, { "Retry-After": "1" }],
    ["at the instant: nothing left, no header", 60_000, 0, {}],
    ["long after: 0, never negative, no header", 86_400_000, 0, {}],
  ];
  it.each(waits)("a wait of 60 s replayed %s", (_, elapsedMs, seconds, headers) => {
    const stored = refusalFieldsToStore({ retry_after: 60 }, answeredAt);
    expect(replayedRefusalFields(stored, later(elapsedMs))).toEqual({
      fields: { retry_after: seconds },
      headers,
    });
  });

  it("keeps a wait in its place among the other fields", () => {
    const stored = refusalFieldsToStore({ reason: "x", retry_after: 5, limit: "y" }, answeredAt);
    expect(Object.keys(replayedRefusalFields(stored, answeredAt)!.fields)).toEqual([
      "reason",
      "retry_after",
      "limit",
    ]);
  });

  it("answers nothing for a row ended before the fields were stored, or one it cannot read", () => {
    expect(replayedRefusalFields(null, answeredAt)).toBeUndefined();
    expect(replayedRefusalFields({ limit: "daily" }, answeredAt)).toBeUndefined();
    expect(replayedRefusalFields([], answeredAt)).toEqual({ fields: {}, headers: {} });
  });
});
