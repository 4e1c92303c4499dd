import { describe, expect, it } from "vitest";
import { proofProgressLine } from "./format.ts";

describe("proofProgressLine", () => {
  // Mutation: estimating from the attempts alone (as if one attempt took a millisecond) fails this.
  it("names the bits and the average time at the rate seen so far", () => {
    // 700,000 attempts in the first second: 2^22 = 4,194,304 attempts take about 6 s.
    expect(proofProgressLine({ bits: 22, attempts: 700_000, elapsedMs: 1_000 })).toBe(
      "agent-wallet: registration asks for a proof of work (22 bits); solving it, about 6 s on average on this machine…",
    );
  });
});
