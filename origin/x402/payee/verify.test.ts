import { describe, expect, it } from "vitest";
import { WEI_PER_UNIT } from "../../../shared/constants.ts";
import { X402_REASONS } from "../reasons.ts";
import type { Authorization } from "./payment.ts";
import { factsRefusal, windowRefusal } from "./verify.ts";

// The pure rules that keep the settler from signing what the chain would revert (settle.ts): the
// validity window with its margin, and the balance with what the payer's other settlements hold.

const NOW = 1_800_000_000n;
const MARGIN = 6n;

describe("windowRefusal: the chain takes validAfter < block time < validBefore, a block time we do not know", () => {
  const cases: Array<[string, { validAfter: bigint; validBefore: bigint }, string | null]> = [
    [
      "the official client's window (validAfter 0, now + 60)",
      { validAfter: 0n, validBefore: NOW + 60n },
      null,
    ],
    [
      "an old client's validAfter, ten minutes back",
      { validAfter: NOW - 600n, validBefore: NOW + 60n },
      null,
    ],
    ["validAfter exactly the margin back", { validAfter: NOW - MARGIN, validBefore: NOW + 60n }, null],
    ["validBefore a second past the margin", { validAfter: 0n, validBefore: NOW + MARGIN + 1n }, null],
    [
      "validBefore exactly the margin ahead (the enclave's read, a moment later, may be in the next second)",
      { validAfter: 0n, validBefore: NOW + MARGIN },
      X402_REASONS.validBefore,
    ],
    [
      "validAfter = now (reverts in a block of this second)",
      { validAfter: NOW, validBefore: NOW + 60n },
      X402_REASONS.validAfter,
    ],
    [
      "validAfter inside the margin",
      { validAfter: NOW - MARGIN + 1n, validBefore: NOW + 60n },
      X402_REASONS.validAfter,
    ],
    ["validAfter in the future", { validAfter: NOW + 30n, validBefore: NOW + 60n }, X402_REASONS.validAfter],
    ["validBefore one second ahead", { validAfter: 0n, validBefore: NOW + 1n }, X402_REASONS.validBefore],
    [
      "validBefore inside the margin",
      { validAfter: 0n, validBefore: NOW + MARGIN - 1n },
      X402_REASONS.validBefore,
    ],
    ["validBefore = now", { validAfter: 0n, validBefore: NOW }, X402_REASONS.validBefore],
    ["expired", { validAfter: 0n, validBefore: NOW - 1n }, X402_REASONS.validBefore],
  ];
  for (const [name, window, reason] of cases) {
    it(name, () => {
      expect(windowRefusal(window, NOW, MARGIN)).toBe(reason);
    });
  }

  it("without a margin, only what the chain refuses outright", () => {
    expect(windowRefusal({ validAfter: NOW, validBefore: NOW + 1n }, NOW, 0n)).toBeNull();
    expect(windowRefusal({ validAfter: NOW + 1n, validBefore: NOW + 2n }, NOW, 0n)).toBe(
      X402_REASONS.validAfter,
    );
  });
});

describe("factsRefusal: the balance covers this payment and what is held for the payer's others", () => {
  const authorization: Authorization = {
    from: "0x1111111111111111111111111111111111111111",
    to: "0x2222222222222222222222222222222222222222",
    value: 10_000n,
    validAfter: 0n,
    validBefore: NOW + 60n,
    nonce: `0x${"ab".repeat(32)}`,
  };
  const units = (n: bigint): bigint => n * WEI_PER_UNIT;
  const cases: Array<
    [string, { nonceUsed: boolean; balanceWei: bigint } | undefined, bigint, string | null]
  > = [
    ["exactly the amount, nothing held", { nonceUsed: false, balanceWei: units(10_000n) }, 0n, null],
    [
      "a wei short",
      { nonceUsed: false, balanceWei: units(10_000n) - 1n },
      0n,
      X402_REASONS.insufficientBalance,
    ],
    ["two payments' worth, one held", { nonceUsed: false, balanceWei: units(20_000n) }, units(10_000n), null],
    [
      "two payments' worth, two held",
      { nonceUsed: false, balanceWei: units(20_000n) },
      units(20_000n),
      X402_REASONS.insufficientBalance,
    ],
    [
      "the authorization used on chain",
      { nonceUsed: true, balanceWei: units(1_000_000n) },
      0n,
      X402_REASONS.nonceUsed,
    ],
    ["the chain did not answer", undefined, 0n, X402_REASONS.chainUnavailable],
  ];
  for (const [name, facts, held, reason] of cases) {
    it(name, () => {
      expect(factsRefusal(facts, authorization, held)).toBe(reason);
    });
  }
});
