import { describe, expect, it } from "vitest";
import type { SignerPolicy } from "../../origin/signer/types.ts";
import { mergeFaucetTerms, mergePolicy, samePolicy } from "./policy-admin.ts";

const sealed: SignerPolicy = {
  perTxLimitUnits: 10n,
  dailyLimitUnits: 100n,
  recipientAllowlist: ["0x1111111111111111111111111111111111111111"],
  x402AmountUnits: 10_000n,
  x402PayTo: "0x2222222222222222222222222222222222222222",
  x402MaxTimeoutSeconds: 180,
  operatorPool: "0x00000000000000000000000000000000000000aa",
  feeCeilingWei: 10n ** 15n,
  x402ValidityMarginSeconds: 6,
  x402DailyLimit: 1000,
  settlerDailyFeeUnits: 20_000_000n,
};

describe("mergePolicy", () => {
  it("overrides only the named fields of the sealed policy", () => {
    expect(mergePolicy(sealed, { dailyLimitUnits: 200n, recipientAllowlist: null })).toEqual({
      ok: true,
      value: { ...sealed, dailyLimitUnits: 200n, recipientAllowlist: null },
    });
  });

  it("needs every field when nothing is sealed, naming the missing flags", () => {
    expect(mergePolicy(null, { perTxLimitUnits: 5n })).toEqual({
      ok: false,
      error: {
        code: "usage",
        message: expect.stringContaining(
          "missing --daily, --fee-ceiling, --allowlist, --x402-amount, --x402-pay-to, --max-validity, --x402-margin, --x402-daily, --settler-daily, --operator-pool",
        ),
      },
    });
    const { x402PayTo: _payTo, ...withoutPayTo } = sealed;
    expect(mergePolicy(null, { ...withoutPayTo, x402AmountUnits: null })).toEqual({
      ok: true,
      value: { ...sealed, x402AmountUnits: null, x402PayTo: null },
    });
  });

  it("sets x402 amount and payTo together; clearing the amount clears payTo", () => {
    expect(mergePolicy(sealed, { x402AmountUnits: null })).toMatchObject({
      ok: true,
      value: { x402AmountUnits: null, x402PayTo: null },
    });
    const cleared = { ...sealed, x402AmountUnits: null, x402PayTo: null };
    expect(mergePolicy(cleared, { x402AmountUnits: 5n })).toMatchObject({
      ok: false,
      error: { code: "usage" },
    });
    expect(mergePolicy(sealed, { x402AmountUnits: null, x402PayTo: sealed.x402PayTo })).toMatchObject({
      ok: false,
      error: { code: "usage" },
    });
  });
});

describe("mergeFaucetTerms", () => {
  const terms = { payoutUnits: 1_000_000n, cooldownMs: 60_000, dailyLimitUnits: 10_000_000n };

  it("keeps the sealed terms the flags do not name", () => {
    expect(mergeFaucetTerms(terms, { cooldownMs: 0 })).toEqual({
      ok: true,
      value: { ...terms, cooldownMs: 0 },
    });
  });

  it("needs every term when none is sealed, naming the missing flags", () => {
    expect(mergeFaucetTerms(null, { payoutUnits: 5n })).toEqual({
      ok: false,
      error: { code: "usage", message: expect.stringContaining("missing --cooldown-ms, --payout-daily") },
    });
    expect(mergeFaucetTerms(null, terms)).toEqual({ ok: true, value: terms });
  });

  it("refuses terms whose daily units per recipient are below the payout (nothing would ever be paid), the kept terms included", () => {
    const refusal = {
      ok: false,
      error: {
        code: "usage",
        message:
          "--payout-daily 999999 is below --payout 1000000: no payout fits a recipient's day, so the faucet would pay nothing",
      },
    };
    expect(mergeFaucetTerms(terms, { dailyLimitUnits: 999_999n })).toEqual(refusal);
    expect(mergeFaucetTerms({ ...terms, dailyLimitUnits: 999_999n }, { payoutUnits: 1_000_000n })).toEqual(
      refusal,
    );
    expect(mergeFaucetTerms(terms, { dailyLimitUnits: 1_000_000n }).ok).toBe(true);
  });
});

describe("samePolicy", () => {
  it("compares every field, addresses without case", () => {
    expect(
      samePolicy(sealed, { ...sealed, operatorPool: "0x00000000000000000000000000000000000000AA" }),
    ).toBe(true);
    expect(samePolicy(sealed, { ...sealed, feeCeilingWei: 1n })).toBe(false);
    expect(samePolicy(null, sealed)).toBe(false);
  });
});
