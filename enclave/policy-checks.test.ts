import { describe, expect, it } from "vitest";
import type { Policy, Treasury } from "./policy.ts";
import {
  checkFaucet,
  checkKeyBinding,
  checkSettlement,
  checkSettlerFeeBudget,
  checkTransfer,
  checkX402,
  MAX_GAS_LIMIT,
  type RecipientPayouts,
  utcDay,
} from "./policy-checks.ts";

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
  x402ValidityMarginSeconds: 6,
  x402DailyLimit: 3,
  settlerDailyFeeUnits: 1_000_000_000n,
  x402MaxPerPaymentUnits: null,
  x402Payees: null,
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
/** What the origin switches on: the code and the detail, never the reason's text. */
const named = (failure: { code: string; detail?: string } | null) =>
  failure && { code: failure.code, detail: failure.detail };

describe("checkTransfer", () => {
  it("passes within every limit and refuses without a policy", () => {
    expect(checkTransfer(policy, transfer)).toBeNull();
    expect(checkTransfer(null, transfer)).toEqual({ code: "not_configured", reason: expect.any(String) });
  });

  it("refuses chain, operator pool (any case), allowlist, fee, per-tx, daily and gas violations with cap_exceeded and their detail", () => {
    const cases: Array<[Partial<typeof transfer>, Partial<Policy>, string, string]> = [
      [{ chainId: 1 }, {}, "chain id not allowed", "chain"],
      [{ to: POOL.toUpperCase().replace("0X", "0x") }, {}, "recipient not allowed", "recipient"],
      [{}, { recipientAllowlist: new Set([PAY_TO]) }, "recipient not allowed", "recipient"],
      [{ costUnits: 101n }, {}, "over the per-transaction limit", "per_transaction"],
      [{ costUnits: 60n, spentTodayUnits: 100n }, {}, "over the daily limit", "daily"],
      [{ gasLimit: MAX_GAS_LIMIT + 1n }, {}, "gas limit above the enclave bound", "gas_limit"],
      [{ maxFeeWei: 10n ** 13n + 1n, costUnits: 11n }, {}, "fee above the policy ceiling", "fee_ceiling"],
    ];
    for (const [input, policyChange, expected, detail] of cases) {
      const failure = checkTransfer({ ...policy, ...policyChange }, { ...transfer, ...input });
      expect(named(failure)).toEqual({ code: "cap_exceeded", detail });
      expect(reason(failure)).toBe(expected);
    }
  });

  it("allows exactly the daily limit and exactly the fee ceiling", () => {
    expect(checkTransfer(policy, { ...transfer, costUnits: 50n, spentTodayUnits: 100n })).toBeNull();
    expect(checkTransfer(policy, { ...transfer, maxFeeWei: 10n ** 13n })).toBeNull();
  });

  it("treats the default limits of 0 as refusing every non-zero transfer", () => {
    expect(checkTransfer({ ...policy, perTxLimitUnits: 0n, dailyLimitUnits: 0n }, transfer)?.code).toBe(
      "cap_exceeded",
    );
  });
});

describe("checkFaucet", () => {
  const terms = { payoutUnits: 100n, cooldownMs: 60_000, dailyLimitUnits: 250n };
  const treasury: Treasury = { faucetKeyRef: "aa".repeat(32), budgetUnits: 1000n, spentUnits: 880n, terms };
  const { spentTodayUnits: _unused, ...tx } = transfer;
  const nowMs = Date.parse("2025-03-02T12:00:00Z");
  const payout = {
    ...tx,
    valueUnits: 100n,
    costUnits: 101n,
    toIsAgentKey: true,
    paid: undefined as RecipientPayouts | undefined,
    nowMs,
    today: "2025-03-02",
  };

  it("pays the sealed payout to an agent key, within the budget", () => {
    expect(checkFaucet(policy, treasury, payout)).toBeNull();
    expect(checkFaucet(policy, treasury, { ...payout, costUnits: 121n })).toEqual({
      code: "cap_exceeded",
      reason: "over the faucet budget",
      detail: "faucet_budget",
    });
  });

  it("refuses another value, a recipient that is no agent key, the cooldown and the recipient's day, each by its detail", () => {
    const lastPaid = (agoMs: number, day: string, unitsToday: bigint) => ({
      paid: { lastPayoutMs: nowMs - agoMs, day, unitsToday },
    });
    const cases: Array<[Partial<typeof payout> & Record<string, unknown>, string]> = [
      [{ valueUnits: 101n }, "faucet_payout"],
      [{ valueUnits: 1_000n }, "faucet_payout"],
      [{ toIsAgentKey: false }, "faucet_recipient"],
      [lastPaid(59_999, "2025-03-02", 100n), "faucet_cooldown"],
      // A clock that went back is inside the cooldown.
      [lastPaid(-1_000, "2025-03-02", 100n), "faucet_cooldown"],
      [lastPaid(60_000, "2025-03-02", 200n), "faucet_daily"],
    ];
    for (const [change, detail] of cases) {
      expect({ change, refused: named(checkFaucet(policy, treasury, { ...payout, ...change })) }).toEqual({
        change,
        refused: { code: "cap_exceeded", detail },
      });
    }
  });

  it("counts only the recipient's units of today, and pays again once the cooldown has run", () => {
    expect(
      checkFaucet(policy, treasury, {
        ...payout,
        paid: { lastPayoutMs: nowMs - 60_000, day: "2025-03-02", unitsToday: 150n },
      }),
    ).toBeNull();
    expect(
      checkFaucet(policy, treasury, {
        ...payout,
        paid: { lastPayoutMs: nowMs - 60_000, day: "2025-03-01", unitsToday: 250n },
      }),
    ).toBeNull();
  });

  it("never pays the operator pool, keeps to the fee ceiling, and signs nothing without a policy or terms", () => {
    expect(named(checkFaucet(policy, treasury, { ...payout, to: POOL }))).toEqual({
      code: "cap_exceeded",
      detail: "recipient",
    });
    expect(reason(checkFaucet(policy, treasury, { ...payout, maxFeeWei: 10n ** 13n + 1n }))).toBe(
      "fee above the policy ceiling",
    );
    expect(checkFaucet(null, treasury, payout)?.code).toBe("not_configured");
    expect(checkFaucet(policy, { ...treasury, terms: null }, payout)?.code).toBe("not_configured");
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
    signedToday: 2,
  };

  it("passes the configured amount, payTo and maximum validity, up to the sealed count of the day", () => {
    expect(checkX402(policy, auth)).toBeNull();
    expect(checkX402(policy, { ...auth, validBefore: now + 6n })).toBeNull();
  });

  it("refuses everything else, each by its detail", () => {
    const cases: Array<[Partial<typeof auth>, string, string]> = [
      [{ valueUnits: 9_999n }, "amount differs from policy", "x402_amount"],
      [{ to: POOL }, "payTo differs from policy", "x402_pay_to"],
      [{ from: POOL }, "payer not allowed", "x402_payer"],
      [{ validBefore: now + 181n }, "validity above the maximum", "x402_validity"],
      [{ validBefore: now }, "authorization already expired", "x402_validity"],
      [{ validBefore: now + 5n }, "authorization expires within the sealed validity margin", "x402_validity"],
      [{ validAfter: now + 200n }, "empty validity window", "x402_validity"],
      [{ signedToday: 3 }, "over the key's sealed daily x402 authorizations", "x402_daily"],
    ];
    for (const [change, expected, detail] of cases) {
      const failure = checkX402(policy, { ...auth, ...change });
      expect([reason(failure), named(failure)]).toEqual([expected, { code: "cap_exceeded", detail }]);
    }
  });

  it("with a ceiling sealed, refuses over its amount or off its payee list as x402_ceiling, the bound named as the rule", () => {
    const other = "0x4444444444444444444444444444444444444444";
    const ceiling = { ...policy, x402MaxPerPaymentUnits: 50_000n, x402Payees: new Set([other]) };
    expect(checkX402(ceiling, { ...auth, to: other, valueUnits: 50_000n })).toBeNull();
    expect(checkX402(ceiling, { ...auth, to: other, valueUnits: 50_001n })).toMatchObject({
      code: "cap_exceeded",
      detail: "x402_ceiling",
      rule: "x402_max_per_payment_units",
    });
    const offList = "0x5555555555555555555555555555555555555555";
    expect(checkX402(ceiling, { ...auth, to: offList, valueUnits: 1_000n })).toMatchObject({
      code: "cap_exceeded",
      detail: "x402_ceiling",
      rule: "x402_payees",
    });
  });

  it("answers not_configured without x402 settings", () => {
    expect(checkX402({ ...policy, x402AmountUnits: null, x402PayTo: null }, auth)?.code).toBe(
      "not_configured",
    );
  });
});

describe("checkSettlement", () => {
  const now = 1_700_000_000n;
  const auth = {
    from: "0x3333333333333333333333333333333333333333",
    to: PAY_TO,
    valueUnits: 10_000n,
    validAfter: now - 6n,
    validBefore: now + 6n,
    nowSeconds: now,
  };

  it("settles inside the window by the sealed margin on both sides, up to the maximum validity", () => {
    expect(checkSettlement(policy, auth)).toBeNull();
    expect(checkSettlement(policy, { ...auth, validAfter: 0n, validBefore: now + 180n })).toBeNull();
  });

  it("refuses the terms, and a window the precompile could refuse, by name", () => {
    const cases: Array<[Partial<typeof auth>, string]> = [
      [{ valueUnits: 1n }, "x402_amount"],
      [{ to: POOL }, "x402_pay_to"],
      [{ from: POOL }, "x402_payer"],
      [{ validAfter: now }, "settlement_window"],
      [{ validAfter: now - 5n }, "settlement_window"],
      [{ validBefore: now + 5n }, "settlement_window"],
      [{ validBefore: now - 10n }, "settlement_window"],
      [{ validBefore: now + 181n }, "settlement_window"],
    ];
    for (const [change, detail] of cases) {
      expect({ change, refused: named(checkSettlement(policy, { ...auth, ...change })) }).toEqual({
        change,
        refused: { code: "cap_exceeded", detail },
      });
    }
    expect(checkSettlement(null, auth)?.code).toBe("not_configured");
  });

  it("applies no margin when the sealed margin is 0", () => {
    const noMargin = { ...policy, x402ValidityMarginSeconds: 0 };
    expect(checkSettlement(noMargin, { ...auth, validAfter: now, validBefore: now })).toBeNull();
  });
});

describe("checkSettlerFeeBudget", () => {
  it("allows the budget exactly and refuses one unit past it, by name", () => {
    const sealed = { ...policy, settlerDailyFeeUnits: 221n };
    const cases: Array<[bigint, bigint, unknown]> = [
      [0n, 100n, null],
      [200n, 21n, null],
      [221n, 0n, null],
      // Mutations: refusing at the budget (>=) refuses 200 + 21 above; leaving out what was spent
      // today lets 200 + 22 through.
      [200n, 22n, { code: "cap_exceeded", detail: "settler_fee_budget" }],
      [221n, 1n, { code: "cap_exceeded", detail: "settler_fee_budget" }],
      [0n, 222n, { code: "cap_exceeded", detail: "settler_fee_budget" }],
    ];
    for (const [spentTodayUnits, feeUnits, expected] of cases) {
      expect(
        named(checkSettlerFeeBudget(sealed, { spentTodayUnits, feeUnits })),
        `${spentTodayUnits}+${feeUnits}`,
      ).toEqual(expected);
    }
  });
});

describe("checkKeyBinding", () => {
  it("passes the key's own address in any case and refuses another as key_binding", () => {
    const address = "0x3333333333333333333333333333333333333333";
    expect(checkKeyBinding(address, address.toUpperCase().replace("0X", "0x"))).toBeNull();
    expect(named(checkKeyBinding(address, PAY_TO))).toEqual({
      code: "key_purpose_mismatch",
      detail: "key_binding",
    });
  });
});

describe("utcDay", () => {
  it("changes at UTC midnight", () => {
    expect(utcDay(new Date("2025-03-01T23:59:59.999Z"))).toBe("2025-03-01");
    expect(utcDay(new Date("2025-03-02T00:00:00.000Z"))).toBe("2025-03-02");
  });
});
