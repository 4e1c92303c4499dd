import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { solveChallenge, solvesChallenge } from "../../shared/registration-proof.ts";
import {
  checkProof,
  issueChallenge,
  PROOF_TTL_SECONDS,
  proofKey,
  requiredProofBits,
} from "./proof-of-work.ts";

// The registration proof of work's pure rules (docs/security.md, "Proof of work at registration"):
// the difficulty curve, and what a proof must be to pass. The origin's use of them is in
// register.int.test.ts, the client's and the CLI's in cli/register-proof.int.test.ts.

const key = proofKey(randomBytes(32).toString("hex"));
const now = new Date("2031-03-04T10:00:05Z");
const group = "group-a";

async function solved(
  bits: number,
  overrides: Partial<{ ipGroup: string; now: Date }> = {},
): Promise<string> {
  const challenge = issueChallenge(key, {
    ipGroup: overrides.ipGroup ?? group,
    day: "2031-03-04",
    count: 2,
    bits,
    now: overrides.now ?? now,
  });
  return `${challenge}.${await solveChallenge({ challenge, bits })}`;
}

describe("requiredProofBits: the configured bits, plus one per halving of the day's quota left", () => {
  // Mutation: Math.ceil for Math.floor of the log adds a bit before half the quota is gone.
  it.each([
    // [base, issued today, network quota, bits]
    [0, 0, 100, 0],
    [0, 99, 100, 0],
    [20, 0, 100, 20],
    [20, 49, 100, 20],
    [20, 50, 100, 21],
    [20, 74, 100, 21],
    [20, 75, 100, 22],
    [20, 88, 100, 23],
    [20, 94, 100, 24],
    [20, 97, 100, 25],
    [20, 99, 100, 26],
    [20, 9_999, 10_000, 28],
    [24, 9_999, 10_000, 32],
    [20, 100, 100, 26],
  ])("base %i, %i of %i issued: %i bits", (baseBits, networkToday, networkDaily, bits) => {
    expect(requiredProofBits({ baseBits, networkToday, networkDaily })).toBe(bits);
  });
});

describe("checkProof", () => {
  it("accepts a solved challenge of this group, in time, and says what it was bound to", async () => {
    const header = await solved(8);
    expect(checkProof(key, { header, ipGroup: group, now })).toEqual({
      ok: true,
      value: { day: "2031-03-04", count: 2, bits: 8 },
    });
  });

  // Mutation: leaving the IP group out of the MAC lets another group's proof pass.
  it("refuses a proof solved for another IP group (the MAC binds the group)", async () => {
    const header = await solved(8, { ipGroup: "group-b" });
    expect(checkProof(key, { header, ipGroup: group, now })).toEqual({ ok: false, error: "forged" });
  });

  // Mutation: not comparing the expiry with now lets this pass.
  it("refuses a proof past its expiry", async () => {
    const header = await solved(8);
    const later = new Date(now.getTime() + (PROOF_TTL_SECONDS + 1) * 1000);
    expect(checkProof(key, { header, ipGroup: group, now: later })).toEqual({ ok: false, error: "expired" });
  });

  // Mutation: trusting the client's solution without hashing it lets this pass.
  it("refuses a solution that does not reach the bits", async () => {
    const challenge = issueChallenge(key, { ipGroup: group, day: "2031-03-04", count: 2, bits: 16, now });
    let wrong = 0;
    while (solvesChallenge(challenge, String(wrong), 16)) wrong++;
    expect(checkProof(key, { header: `${challenge}.${wrong}`, ipGroup: group, now })).toEqual({
      ok: false,
      error: "unsolved",
    });
  });

  // Mutation: a MAC over the version, day and count only (not the bits and expiry) lets this pass.
  it("refuses a challenge whose bits were lowered (the MAC covers them)", async () => {
    const header = (await solved(12)).replace(/^(v1\.[^.]+\.[^.]+\.)12\./, "$11.");
    expect(checkProof(key, { header, ipGroup: group, now })).toEqual({ ok: false, error: "forged" });
  });

  it.each([
    ["missing", undefined, "missing"],
    ["empty", "", "missing"],
    ["a word", "please", "malformed"],
    [
      "a challenge without a solution",
      "v1.2031-03-04.2.8.1962123456.00000000000000000000000000000000",
      "malformed",
    ],
    ["a negative solution", "v1.2031-03-04.2.8.1962123456.00000000000000000000000000000000.-1", "malformed"],
  ])("refuses %s", (_case, header, refusal) => {
    expect(checkProof(key, { header, ipGroup: group, now })).toEqual({ ok: false, error: refusal });
  });
});
