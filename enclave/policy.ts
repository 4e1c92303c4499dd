/**
 * The signing policy sealed inside the enclave (docs/enclave.md, "The enclave's signing policy"), set by
 * `configure_policy`, and the faucet treasury with its payout terms, set by `configure_treasury`.
 * In memory amounts are bigint and addresses lowercase, so every comparison is exact.
 */
import type { WirePolicy } from "../shared/enclave-ops.ts";

export type Policy = {
  perTxLimitUnits: bigint;
  dailyLimitUnits: bigint;
  /** Lowercase addresses; null allows any recipient except the operator pool. */
  recipientAllowlist: ReadonlySet<string> | null;
  x402AmountUnits: bigint | null;
  x402PayTo: string | null;
  x402MaxTimeoutSeconds: number;
  operatorPool: string;
  /** Ceiling on one transaction's gas limit × max fee per gas, in wei. */
  feeCeilingWei: bigint;
  /** Whole seconds an x402 authorization must be valid on each side of the enclave's now. */
  x402ValidityMarginSeconds: number;
  /** x402 authorizations one key may sign per UTC day. */
  x402DailyLimit: number;
  /**
   * Units of fee the settler key may commit per UTC day (the maximum fee of each settlement and
   * filler it signs, rounded up to units): the most a compromised origin can burn of its float a day.
   */
  settlerDailyFeeUnits: bigint;
  /**
   * The node's x402 ceiling beside the sealed pair: the most one payment may be (null: no
   * ceiling, the pair alone is paid), docs/enclave.md#the-nodes-x402-ceiling.
   */
  x402MaxPerPaymentUnits: bigint | null;
  /** Lowercase payees the ceiling allows; null: any payee. */
  x402Payees: ReadonlySet<string> | null;
};

/** What sign_faucet pays and how often (configure_treasury). */
export type FaucetTerms = {
  payoutUnits: bigint;
  cooldownMs: number;
  /** Units one recipient may receive per UTC day. */
  dailyLimitUnits: bigint;
};

export type Treasury = {
  faucetKeyRef: string;
  budgetUnits: bigint;
  spentUnits: bigint;
  /** null only for a treasury sealed before the terms existed: it pays nothing until reconfigured. */
  terms: FaucetTerms | null;
};

/** Wire (snake_case, decimal strings) to in-memory policy. */
export function policyFromWire(wire: WirePolicy): Policy {
  return {
    perTxLimitUnits: BigInt(wire.per_tx_limit_units),
    dailyLimitUnits: BigInt(wire.daily_limit_units),
    recipientAllowlist: wire.recipient_allowlist
      ? new Set(wire.recipient_allowlist.map((address) => address.toLowerCase()))
      : null,
    x402AmountUnits: wire.x402_amount_units === null ? null : BigInt(wire.x402_amount_units),
    x402PayTo: wire.x402_pay_to === null ? null : wire.x402_pay_to.toLowerCase(),
    x402MaxTimeoutSeconds: wire.x402_max_timeout_seconds,
    operatorPool: wire.operator_pool.toLowerCase(),
    feeCeilingWei: BigInt(wire.fee_ceiling_wei),
    x402ValidityMarginSeconds: wire.x402_validity_margin_seconds,
    x402DailyLimit: wire.x402_daily_limit,
    settlerDailyFeeUnits: BigInt(wire.settler_daily_fee_units),
    x402MaxPerPaymentUnits:
      wire.x402_max_per_payment_units == null ? null : BigInt(wire.x402_max_per_payment_units),
    x402Payees: wire.x402_payees ? new Set(wire.x402_payees.map((address) => address.toLowerCase())) : null,
  };
}

/** In-memory policy to wire form (addresses lowercase). */
export function policyToWire(policy: Policy): WirePolicy {
  return {
    per_tx_limit_units: policy.perTxLimitUnits.toString(),
    daily_limit_units: policy.dailyLimitUnits.toString(),
    recipient_allowlist: policy.recipientAllowlist ? [...policy.recipientAllowlist] : null,
    x402_amount_units: policy.x402AmountUnits === null ? null : policy.x402AmountUnits.toString(),
    x402_pay_to: policy.x402PayTo,
    x402_max_timeout_seconds: policy.x402MaxTimeoutSeconds,
    operator_pool: policy.operatorPool,
    fee_ceiling_wei: policy.feeCeilingWei.toString(),
    x402_validity_margin_seconds: policy.x402ValidityMarginSeconds,
    x402_daily_limit: policy.x402DailyLimit,
    settler_daily_fee_units: policy.settlerDailyFeeUnits.toString(),
    // Only when set: a node without a ceiling answers exactly what it answered before one existed.
    ...(policy.x402MaxPerPaymentUnits === null
      ? {}
      : { x402_max_per_payment_units: policy.x402MaxPerPaymentUnits.toString() }),
    ...(policy.x402Payees === null ? {} : { x402_payees: [...policy.x402Payees] }),
  };
}
