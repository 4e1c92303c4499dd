import { describe, expect, it } from "vitest";
import { type ProofProgress, solveChallenge, solvesChallenge } from "./registration-proof.ts";

// The client's half of the registration proof of work (docs/security.md, "Proof of work at
// registration"). The origin's checks are origin/registration/proof-of-work.test.ts.

describe("solveChallenge", () => {
  // `progress-test-2` happens to need 753,608 attempts at 18 bits (46 slices of 16,384), found
  // once by this same solver; the hash makes it so on every run.
  const challenge = "progress-test-2";

  // A fake clock, as the test's only fake: how long a CPU-bound loop takes cannot be set for
  // real. It advances 250 ms at each look the solver takes between two slices.
  // Mutation: telling onProgress after every slice (not once per progressEveryMs) fails this.
  it("finds the smallest solution and reports about once a second, not before the first second", async () => {
    let clock = -250;
    const reports: ProofProgress[] = [];
    const solution = await solveChallenge({
      challenge,
      bits: 18,
      now: () => (clock += 250),
      onProgress: (progress) => reports.push(progress),
    });
    expect(solution).toBe("753608");
    expect(solvesChallenge(challenge, solution, 18)).toBe(true);
    expect(solvesChallenge(challenge, "753607", 18)).toBe(false);
    expect(reports[0]).toEqual({ bits: 18, attempts: 4 * 16_384, elapsedMs: 1_000 });
    expect(reports.map((report) => report.elapsedMs)).toEqual(
      Array.from({ length: 11 }, (_, i) => (i + 1) * 1_000),
    );
  });

  it("refuses a difficulty outside 0 to 32 bits", async () => {
    await expect(solveChallenge({ challenge, bits: 33 })).rejects.toThrow(RangeError);
    await expect(solveChallenge({ challenge, bits: -1 })).rejects.toThrow(RangeError);
  });
});

describe("solvesChallenge", () => {
  it.each([
    ["a leading zero", "0753608"],
    ["a sign", "+753608"],
    ["a fraction", "753608.0"],
    ["hex", "0xb7fc8"],
    ["2^53 and above", "9007199254740992"],
    ["empty", ""],
  ])("refuses a solution written with %s", (_case, solution) => {
    expect(solvesChallenge("progress-test-2", solution, 18)).toBe(false);
  });
});
