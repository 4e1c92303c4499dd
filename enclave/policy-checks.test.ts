import { describe, expect, it } from "vitest";
import type { Policy, Treasury } from "./policy.ts";
import { checkFaucet, checkTransfer, checkX402, MAX_GAS_LIMIT, utcDay } from "./policy-checks.ts";

const POOL = "0x00000000000000000000000000000000000000aa";
const PAY_TO = "0x2222222222222222222222222222222222222222";
const policy: Policy = {
  perTxLimitUnits: 100n,
  dailyLimitUnits: 150n,
  recipientAllowlist: null,
  x402AmountUnits: 10_000n,
  x402PayTo: PAY_TO,
  x402MaxTimeoutSeconds: 180,
  operatorPool: POOL,
  feeCeilingWei: 10n ** 13n,
};
const transfer = {
  sealedChainId: 77,
  chainId: 77,
  to: "0x1111111111111111111111111111111111111111",
  gasLimit: 21_000n,
  maxFeeWei: 21_000n,
  costUnits: 10n,
  spentTodayUnits: 0n,
};
const reason = (failure: { reason: string } | null): string | null => failure?.reason ?? null;

describe("checkTransfer", () => {
  it("passes within every limit and refuses without a policy", () => {
    expect(checkTransfer(policy, transfer)).toBeNull();
    expect(checkTransfer(null, transfer)).toEqual({ code: "not_configured", reason: expect.any(String) });
  });

  it("refuses chain, operator pool (any case), allowlist, fee, per-tx, daily and gas violations with cap_exceeded", () => {
    const cases: Array<[Partial<typeof transfer>, Partial<Policy>, string]> = [
      [{ chainId: 1 }, {}, "chain id not allowed"],
      [{ to: POOL.toUpperCase().replace("0X", "0x") }, {}, "recipient not allowed"],
      [{}, { recipientAllowlist: new Set([PAY_TO]) }, "recipient not allowed"],
      [{ costUnits: 101n }, {}, "over the per-transaction limit"],
      [{ costUnits: 60n, spentTodayUnits: 100n }, {}, "over the daily limit"],
      [{ gasLimit: MAX_GAS_LIMIT + 1n }, {}, "gas limit above the enclave bound"],
      [{ maxFeeWei: 10n ** 13n + 1n, costUnits: 11n }, {}, "fee above the policy ceiling"],
    ];
    for (const [input, policyChange, expected] of cases) {
      const failure = checkTransfer({ ...policy, ...policyChange }, { ...transfer, ...input });
      expect(failure?.code).toBe("cap_exceeded");
      expect(reason(failure)).toBe(expected);
    }
  });

  it("allows exactly the daily limit and exactly the fee ceiling", () => {
    expect(checkTransfer(policy, { ...transfer, costUnits: 50n, spentTodayUnits: 100n })).toBeNull();
    expect(checkTransfer(policy, { ...transfer, maxFeeWei: 10n ** 13n })).toBeNull();
  });

  it("treats the default limits of 0 as refusing every non-zero transfer (SPEC Limits)", () => {
    expect(checkTransfer({ ...policy, perTxLimitUnits: 0n, dailyLimitUnits: 0n }, transfer)?.code).toBe(
      "cap_exceeded",
    );
  });
});

describe("checkFaucet", () => {
  const treasury: Treasury = { faucetKeyRef: "aa".repeat(32), budgetUnits: 1000n, spentUnits: 900n };
  const { spentTodayUnits: _unused, ...payout } = transfer;
  it("stays within the budget", () => {
    expect(checkFaucet(policy, treasury, { ...payout, costUnits: 100n })).toBeNull();
    expect(reason(checkFaucet(policy, treasury, { ...payout, costUnits: 101n }))).toBe(
      "over the faucet budget",
    );
  });
  it("never pays the operator pool, keeps to the fee ceiling, and signs nothing without a policy", () => {
    expect(checkFaucet(policy, treasury, { ...payout, to: POOL })?.code).toBe("cap_exceeded");
    expect(reason(checkFaucet(policy, treasury, { ...payout, maxFeeWei: 10n ** 13n + 1n }))).toBe(
      "fee above the policy ceiling",
    );
    expect(checkFaucet(null, treasury, payout)?.code).toBe("not_configured");
  });
});

describe("checkX402", () => {
  const now = 1_700_000_000n;
  const auth = {
    from: "0x3333333333333333333333333333333333333333",
    to: PAY_TO,
    valueUnits: 10_000n,
    validAfter: 0n,
    validBefore: now + 180n,
    nowSeconds: now,
  };

  it("passes the configured amount, payTo and maximum validity", () => {
    expect(checkX402(policy, auth)).toBeNull();
  });

  it("refuses everything else", () => {
    const cases: Array<[Partial<typeof auth>, string]> = [
      [{ valueUnits: 9_999n }, "amount differs from policy"],
      [{ to: POOL }, "payTo differs from policy"],
      [{ from: POOL }, "payer not allowed"],
      [{ validBefore: now + 181n }, "validity above the maximum"],
      [{ validBefore: now }, "authorization already expired"],
      [{ validAfter: now + 200n }, "empty validity window"],
    ];
    for (const [change, expected] of cases)
      expect(reason(checkX402(policy, { ...auth, ...change }))).toBe(expected);
  });

  it("answers not_configured without x402 settings", () => {
    expect(checkX402({ ...policy, x402AmountUnits: null, x402PayTo: null }, auth)?.code).toBe(
      "not_configured",
    );
  });
});

describe("utcDay", () => {
  it("changes at UTC midnight", () => {
    expect(utcDay(new Date("2025-03-01T23:59:59.999Z"))).toBe("2025-03-01");
    expect(utcDay(new Date("2025-03-02T00:00:00.000Z"))).toBe("2025-03-02");
  });
});
