import { describe, expect, it } from "vitest";
import { actionView } from "../testing/action-view.ts";
import { formatEventLine, proofProgressLine } from "./format.ts";

describe("proofProgressLine", () => {
  // Mutation: estimating from the attempts alone (as if one attempt took a millisecond) fails this.
  it("names the bits and the average time at the rate seen so far", () => {
    // 700,000 attempts in the first second: 2^22 = 4,194,304 attempts take about 6 s.
    expect(proofProgressLine({ bits: 22, attempts: 700_000, elapsedMs: 1_000 })).toBe(
      "agent-wallet: registration asks for a proof of work (22 bits); solving it, about 6 s on average on this machine…",
    );
  });
});

describe("formatEventLine", () => {
  const action = actionView({
    action_id: "0b7c7d5e-1111-4222-8333-944445555666",
    status: "failed",
    amount: "9007199254740993123",
    error_code: "broadcast_refused",
    created_at: "2026-11-29T18:04:43.123Z",
    updated_at: "2026-11-29T18:04:43.123Z",
  });

  // Mutation: dividing the units as a Number (a float) prints 9007199254740.992 and fails this.
  it("prints the time, type, action, kind, status, the amount in USDC exactly, the recipient and the error", () => {
    expect(
      formatEventLine({
        id: "7",
        type: "action.failed",
        occurred_at: "2026-11-29T18:04:43.123Z",
        data: action,
      }),
    ).toBe(
      "2026-11-29T18:04:43.123Z action.failed 0b7c7d5e-1111-4222-8333-944445555666 transfer failed 9007199254740.993123 USDC to 0x1111111111111111111111111111111111111111 error broadcast_refused",
    );
  });

  it("prints another type's data as JSON", () => {
    expect(
      formatEventLine({
        id: "8",
        type: "identity.disabled",
        occurred_at: "2026-11-29T18:04:44.000Z",
        data: { a: 1 },
      }),
    ).toBe('2026-11-29T18:04:44.000Z identity.disabled {"a":1}');
  });
});
