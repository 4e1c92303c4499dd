import { describe, expect, it } from "vitest";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import { ceilingApplies, evaluateWalletGate, type WalletGateRow } from "./gate.ts";

// The funding gate's verdict from the facts walletGatesSql reads: each row names the fact that
// decides, in the order the gate weighs them.

const READY: WalletGateRow = {
  enabled: true,
  revoked: false,
  verified: true,
  batch_status: "available",
  restored: true,
  ceiling_units: null,
};
const units = (n: bigint): bigint => n * WEI_PER_UNIT;

describe("evaluateWalletGate", () => {
  const cases: Array<[string, WalletGateRow | null, bigint, string | null]> = [
    ["a restored, verified, enabled wallet moves anything", READY, units(1_000_000_000n), null],
    ["a wallet that is not the service's", null, 0n, "batch_not_backed_up"],
    [
      "a disabled identity, whatever else holds",
      { ...READY, enabled: false, verified: false },
      0n,
      "identity_disabled",
    ],
    [
      "a revoked identity, though its enabled flag stands (revocation leaves it as it was)",
      { ...READY, revoked: true },
      0n,
      "identity_revoked",
    ],
    [
      "a revoked identity that was disabled too: revoked, which no enable undoes",
      { ...READY, revoked: true, enabled: false },
      0n,
      "identity_revoked",
    ],
    ["custody not yet proven by the enclave", { ...READY, verified: false }, 0n, "identity_not_verified"],
    [
      "a key batch without a verified backup",
      { ...READY, batch_status: "sealed" },
      0n,
      "batch_not_backed_up",
    ],
    [
      "a backup check comes before restore evidence",
      { ...READY, batch_status: "sealed", restored: false },
      0n,
      "batch_not_backed_up",
    ],
    [
      "no restore drill and no exception: not even zero",
      { ...READY, restored: false },
      0n,
      "no_restore_evidence",
    ],
    [
      "an exception's ceiling, the balance after exactly at it",
      { ...READY, restored: false, ceiling_units: "500" },
      units(500n),
      null,
    ],
    [
      "an exception's ceiling, a wei over it",
      { ...READY, restored: false, ceiling_units: "500" },
      units(500n) + 1n,
      "ceiling_exceeded",
    ],
    [
      "a zero ceiling lets a wallet hold nothing",
      { ...READY, restored: false, ceiling_units: "0" },
      1n,
      "ceiling_exceeded",
    ],
    [
      "a restore drill lifts any ceiling",
      { ...READY, restored: true, ceiling_units: "0" },
      units(10_000n),
      null,
    ],
  ];
  for (const [name, row, balanceAfterWei, reason] of cases) {
    it(name, () => {
      expect(evaluateWalletGate(row, balanceAfterWei)?.reason ?? null).toBe(reason);
    });
  }

  // Callers read a wallet's balance only when ceilingApplies says the verdict needs it (a
  // recipient's is a chain read behind the batch's locks). So for every row above: the verdict
  // differs between nothing and a fortune after the move exactly when ceilingApplies is true.
  for (const [name, row] of cases) {
    it(`ceilingApplies exactly when the balance decides: ${name}`, () => {
      const withNothing = evaluateWalletGate(row, 0n)?.reason ?? null;
      const withAFortune = evaluateWalletGate(row, units(10n ** 30n))?.reason ?? null;
      expect(withNothing !== withAFortune).toBe(ceilingApplies(row));
    });
  }
});
