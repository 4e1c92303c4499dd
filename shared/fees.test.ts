import { describe, expect, it } from "vitest";
import { costUnits, maxFeeUnits, maxFeeWei } from "./fees.ts";

describe("transaction cost (value plus maximum fee)", () => {
  it("multiplies gas limit by max fee per gas, in wei", () => {
    expect(maxFeeWei({ gasLimit: 21_000n, maxFeePerGas: 2_000_000_000n })).toBe(42_000_000_000_000n);
    expect(maxFeeWei({ gasLimit: 21_000n, maxFeePerGas: 0n })).toBe(0n);
  });

  it("rounds the fee up to whole units, so a single wei counts as one unit", () => {
    expect(maxFeeUnits({ gasLimit: 21_000n, maxFeePerGas: 0n })).toBe(0n);
    expect(maxFeeUnits({ gasLimit: 21_000n, maxFeePerGas: 1n })).toBe(1n);
    expect(maxFeeUnits({ gasLimit: 25_000n, maxFeePerGas: 40_000_000n })).toBe(1n); // exactly 10^12 wei
    expect(maxFeeUnits({ gasLimit: 25_000n, maxFeePerGas: 40_000_001n })).toBe(2n);
  });

  it("counts value plus the rounded-up maximum fee", () => {
    expect(costUnits({ valueUnits: 0n, gasLimit: 21_000n, maxFeePerGas: 4_761_904_761_904_761n })).toBe(
      100_000_000n,
    );
    expect(costUnits({ valueUnits: 39n, gasLimit: 21_000n, maxFeePerGas: 476_190_477n })).toBe(50n);
  });
});
