/**
 * The cost of one transaction as the enclave's limits count it (docs/enclave.md, "The
 * enclave's signing policy": limits and budgets count value plus the maximum fee). One function for the
 * enclave's re-check and the origin's money routes, so the gateway's clear errors and the enclave's refusals
 * can never disagree by a rounding. Runtime-neutral: no `node:` imports.
 */
import { WEI_PER_UNIT } from "./constants.ts";

export type FeeFields = { gasLimit: bigint; maxFeePerGas: bigint };

/** The most a transaction can pay in fees: gas limit × max fee per gas, in wei. */
export function maxFeeWei(fee: FeeFields): bigint {
  return fee.gasLimit * fee.maxFeePerGas;
}

/**
 * The maximum fee in 6-decimal units, rounded up: a fee of one wei counts as one unit, so a limit
 * in units is never exceeded by a fee's fraction of a unit.
 */
export function maxFeeUnits(fee: FeeFields): bigint {
  return (maxFeeWei(fee) + WEI_PER_UNIT - 1n) / WEI_PER_UNIT;
}

/** value + ceil(max fee / 10^12): what one transaction counts against per-tx, daily and budget limits. */
export function costUnits(tx: FeeFields & { valueUnits: bigint }): bigint {
  return tx.valueUnits + maxFeeUnits(tx);
}
