/**
 * The enclave's re-check of every signing request against sealed policy (DESIGN §5 "Policy inside
 * the enclave"). The gateway checks first to give clear errors; these checks are the ones that
 * hold even if the gateway is wrong or compromised. Pure functions: a refusal or null.
 */
import type { EnclaveFailure } from "../shared/enclave-protocol.ts";
import type { Policy, Treasury } from "./policy.ts";

/**
 * A bound on the gas limit independent of policy: a data-less native transfer needs 21000 gas, and
 * the fee ceiling below bounds what the gas may cost.
 */
export const MAX_GAS_LIMIT = 500_000n;

const exceeded = (reason: string): EnclaveFailure => ({ code: "cap_exceeded", reason });
const NO_POLICY: EnclaveFailure = { code: "not_configured", reason: "signing policy is not configured" };

export type TransactionCheck = {
  sealedChainId: number;
  chainId: number;
  to: string;
  gasLimit: bigint;
  /** gas limit × max fee per gas (shared/fees.ts maxFeeWei). */
  maxFeeWei: bigint;
  /** value + the maximum fee rounded up to units (shared/fees.ts costUnits). */
  costUnits: bigint;
};

export type TransferCheck = TransactionCheck & { spentTodayUnits: bigint };

/**
 * sign_transfer: chain, recipient, fee ceiling, per-transaction and daily limits. The limits count
 * value plus the maximum fee (DESIGN §5), so no transfer moves more than the policy allows through
 * its fee.
 */
export function checkTransfer(policy: Policy | null, input: TransferCheck): EnclaveFailure | null {
  if (!policy) return NO_POLICY;
  const common = checkCommon(policy, input);
  if (common) return common;
  if (policy.recipientAllowlist && !policy.recipientAllowlist.has(input.to.toLowerCase())) {
    return exceeded("recipient not allowed");
  }
  if (input.costUnits > policy.perTxLimitUnits) return exceeded("over the per-transaction limit");
  if (input.spentTodayUnits + input.costUnits > policy.dailyLimitUnits)
    return exceeded("over the daily limit");
  return null;
}

/**
 * sign_faucet: a policy must be sealed (no policy, no signing: DESIGN §5), chain, never to the
 * operator pool, fee ceiling, and value plus maximum fee within the sealed faucet budget.
 */
export function checkFaucet(
  policy: Policy | null,
  treasury: Treasury,
  input: TransactionCheck,
): EnclaveFailure | null {
  if (!policy) return NO_POLICY;
  const common = checkCommon(policy, input);
  if (common) return common;
  if (treasury.spentUnits + input.costUnits > treasury.budgetUnits) return exceeded("over the faucet budget");
  return null;
}

export type X402Check = {
  from: string;
  to: string;
  valueUnits: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nowSeconds: bigint;
};

/** sign_x402_authorization: exact amount and payTo, bounded validity, never from the operator pool. */
export function checkX402(policy: Policy | null, input: X402Check): EnclaveFailure | null {
  if (!policy || policy.x402AmountUnits === null || policy.x402PayTo === null) {
    return { code: "not_configured", reason: "x402 policy is not configured" };
  }
  if (input.from.toLowerCase() === policy.operatorPool) return exceeded("payer not allowed");
  if (input.to.toLowerCase() !== policy.x402PayTo) return exceeded("payTo differs from policy");
  if (input.valueUnits !== policy.x402AmountUnits) return exceeded("amount differs from policy");
  if (input.validAfter >= input.validBefore) return exceeded("empty validity window");
  if (input.validBefore <= input.nowSeconds) return exceeded("authorization already expired");
  // SPEC x402 objects: validBefore no later than maxTimeoutSeconds after now.
  if (input.validBefore - input.nowSeconds > BigInt(policy.x402MaxTimeoutSeconds)) {
    return exceeded("validity above the maximum");
  }
  return null;
}

function checkCommon(policy: Policy, input: TransactionCheck): EnclaveFailure | null {
  if (input.chainId !== input.sealedChainId) return exceeded("chain id not allowed");
  if (input.to.toLowerCase() === policy.operatorPool) return exceeded("recipient not allowed");
  if (input.gasLimit > MAX_GAS_LIMIT) return exceeded("gas limit above the enclave bound");
  if (input.maxFeeWei > policy.feeCeilingWei) return exceeded("fee above the policy ceiling");
  return null;
}

/** The UTC day of `date` as YYYY-MM-DD: daily limits reset at UTC midnight. */
export function utcDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}
