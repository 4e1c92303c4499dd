/**
 * The enclave's re-check of every signing request against sealed policy (DESIGN §5 "Policy inside
 * the enclave"). The gateway checks first to give clear errors; these checks are the ones that
 * hold even if the gateway is wrong or compromised. Pure functions: a refusal or null.
 */
import type { EnclaveFailure } from "../shared/enclave-protocol.ts";
import type { Policy, Treasury } from "./policy.ts";

/**
 * Bounds the fee a caller can make a wallet burn: policy limits count value only, and a data-less
 * native transfer needs 21000 gas.
 */
export const MAX_GAS_LIMIT = 500_000n;

const exceeded = (reason: string): EnclaveFailure => ({ code: "cap_exceeded", reason });

export type TransferCheck = {
  sealedChainId: number;
  chainId: number;
  to: string;
  valueUnits: bigint;
  gasLimit: bigint;
  spentTodayUnits: bigint;
};

/** sign_transfer: chain, recipient, per-transaction and daily limits. */
export function checkTransfer(policy: Policy | null, input: TransferCheck): EnclaveFailure | null {
  if (!policy) return { code: "not_configured", reason: "signing policy is not configured" };
  const common = checkCommon(policy, input);
  if (common) return common;
  if (policy.recipientAllowlist && !policy.recipientAllowlist.has(input.to.toLowerCase())) {
    return exceeded("recipient not allowed");
  }
  if (input.valueUnits > policy.perTxLimitUnits) return exceeded("over the per-transaction limit");
  if (input.spentTodayUnits + input.valueUnits > policy.dailyLimitUnits)
    return exceeded("over the daily limit");
  return null;
}

export type FaucetCheck = Omit<TransferCheck, "spentTodayUnits">;

/** sign_faucet: chain, never to the operator pool, within the sealed faucet budget. */
export function checkFaucet(
  policy: Policy | null,
  treasury: Treasury,
  input: FaucetCheck,
): EnclaveFailure | null {
  const common = checkCommon(policy, input);
  if (common) return common;
  if (treasury.spentUnits + input.valueUnits > treasury.budgetUnits)
    return exceeded("over the faucet budget");
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

function checkCommon(
  policy: Policy | null,
  input: { sealedChainId: number; chainId: number; to: string; gasLimit: bigint },
): EnclaveFailure | null {
  if (input.chainId !== input.sealedChainId) return exceeded("chain id not allowed");
  if (policy && input.to.toLowerCase() === policy.operatorPool) return exceeded("recipient not allowed");
  if (input.gasLimit > MAX_GAS_LIMIT) return exceeded("gas limit above the enclave bound");
  return null;
}

/** The UTC day of `date` as YYYY-MM-DD: daily limits reset at UTC midnight. */
export function utcDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}
