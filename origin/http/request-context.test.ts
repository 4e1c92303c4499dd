import { describe, expect, it } from "vitest";
import { requestIds } from "./request-context.ts";

// The origin's request ids (request-context.ts): unique, in the shape the edge's share, and
// saying nothing of how many requests the node served between two of them.

describe("requestIds", () => {
  it("gives ids in the edge's shape, none repeated, none a step from the one before", () => {
    // Mutation: a per-process prefix and a counter (as before) gives ids one apart.
    const next = requestIds();
    const ids = Array.from({ length: 2_000 }, () => next());
    for (const id of ids) expect(id).toMatch(/^req_[0-9a-f]{16}$/);
    expect(new Set(ids).size).toBe(ids.length);
    const values = ids.map((id) => BigInt(`0x${id.slice(4)}`));
    const steps = values.slice(1).map((value, n) => value - values[n]!);
    // Random ids step by one with a chance of about 2^-64 each.
    expect(steps.filter((step) => step === 1n)).toEqual([]);
  });
});
