/**
 * The enclave's re-check of every signing request against sealed policy (docs/enclave.md,
 * "The enclave's signing policy"). The gateway checks first to give clear errors; these checks are the ones
 * that hold even if the gateway is wrong or compromised. Pure functions: a refusal or null. Each
 * refusal names the bound that refused it (`detail`), so the origin maps it without reading text.
 */
import type { NodePayee } from "../shared/agent-policy.ts";
import type { EnclaveFailure, RefusalDetail } from "../shared/enclave-protocol.ts";
import type { Policy, Treasury } from "./policy.ts";

/**
 * A bound on the gas limit independent of policy: a data-less native transfer needs 21000 gas, and
 * the fee ceiling below bounds what the gas may cost.
 */
export const MAX_GAS_LIMIT = 500_000n;

const exceeded = (reason: string, detail: RefusalDetail): EnclaveFailure => ({
  code: "cap_exceeded",
  reason,
  detail,
});
const NO_POLICY: EnclaveFailure = { code: "not_configured", reason: "signing policy is not configured" };
const NO_X402: EnclaveFailure = { code: "not_configured", reason: "x402 policy is not configured" };

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
 * value plus the maximum fee, so no transfer moves more than the policy allows through
 * its fee.
 */
export function checkTransfer(policy: Policy | null, input: TransferCheck): EnclaveFailure | null {
  if (!policy) return NO_POLICY;
  const common = checkCommon(policy, input);
  if (common) return common;
  if (policy.recipientAllowlist && !policy.recipientAllowlist.has(input.to.toLowerCase())) {
    return exceeded("recipient not allowed", "recipient");
  }
  if (input.costUnits > policy.perTxLimitUnits)
    return exceeded("over the per-transaction limit", "per_transaction");
  if (input.spentTodayUnits + input.costUnits > policy.dailyLimitUnits)
    return exceeded("over the daily limit", "daily");
  return null;
}

/** What sealed state holds of one faucet recipient (state-store.ts). */
export type RecipientPayouts = {
  /** The enclave's clock at the last payout signed to this recipient, in ms. */
  lastPayoutMs: number;
  /** The treasury's nonce of that payout (absent from a record sealed before it was kept). */
  nonce?: number;
  /** The UTC day `unitsToday` counts. */
  day: string;
  unitsToday: bigint;
};

export type FaucetCheck = TransactionCheck & {
  valueUnits: bigint;
  /** True when `to` is the address of a key this enclave holds in the `agent-transfer` namespace. */
  toIsAgentKey: boolean;
  /** The recipient's sealed payout record, if it has one. */
  paid: RecipientPayouts | undefined;
  nowMs: number;
  today: string;
};

/**
 * sign_faucet: a policy must be sealed (no policy, no signing), chain, never to the
 * operator pool, fee ceiling; then the sealed payout terms: exactly the payout, only to an agent
 * key of this enclave (so a compromised origin cannot pay an address of its choosing), not within
 * the recipient's cooldown, within its units of the UTC day; and value plus maximum fee within
 * the sealed faucet budget.
 */
export function checkFaucet(
  policy: Policy | null,
  treasury: Treasury,
  input: FaucetCheck,
): EnclaveFailure | null {
  if (!policy) return NO_POLICY;
  const { terms } = treasury;
  if (!terms) {
    return {
      code: "not_configured",
      reason: "the treasury has no sealed payout terms: configure it again with the policy key",
    };
  }
  const common = checkCommon(policy, input);
  if (common) return common;
  if (input.valueUnits !== terms.payoutUnits)
    return exceeded("value differs from the sealed payout", "faucet_payout");
  if (!input.toIsAgentKey)
    return exceeded("recipient is not an agent key of this enclave", "faucet_recipient");
  const { paid } = input;
  // A clock that went back reads as inside the cooldown: it errs towards refusing.
  if (paid && input.nowMs - paid.lastPayoutMs < terms.cooldownMs) {
    return exceeded("recipient was paid within the sealed cooldown", "faucet_cooldown");
  }
  const paidToday = paid?.day === input.today ? paid.unitsToday : 0n;
  if (paidToday + input.valueUnits > terms.dailyLimitUnits) {
    return exceeded("over the recipient's sealed daily payout units", "faucet_daily");
  }
  if (treasury.spentUnits + input.costUnits > treasury.budgetUnits)
    return exceeded("over the faucet budget", "faucet_budget");
  return null;
}

type X402Terms = {
  from: string;
  to: string;
  valueUnits: bigint;
};

export type X402Check = X402Terms & {
  validAfter: bigint;
  validBefore: bigint;
  nowSeconds: bigint;
  /** Authorizations this key signed today (UTC, the enclave's clock). */
  signedToday: number;
};

/**
 * sign_x402_authorization: exact amount and payTo, never from the operator pool, a validity that
 * ends within the maximum and not inside the sealed margin (an authorization that could not be
 * settled is not worth signing), and the key's sealed count of the day.
 */
export function checkX402(policy: Policy | null, input: X402Check): EnclaveFailure | null {
  if (!policy) return NO_X402;
  const terms = checkX402Terms(policy, input);
  if (terms) return terms;
  if (input.validAfter >= input.validBefore) return exceeded("empty validity window", "x402_validity");
  if (input.validBefore <= input.nowSeconds)
    return exceeded("authorization already expired", "x402_validity");
  if (input.validBefore < input.nowSeconds + BigInt(policy.x402ValidityMarginSeconds)) {
    return exceeded("authorization expires within the sealed validity margin", "x402_validity");
  }
  // validBefore no later than maxTimeoutSeconds after now.
  if (input.validBefore - input.nowSeconds > BigInt(policy.x402MaxTimeoutSeconds)) {
    return exceeded("validity above the maximum", "x402_validity");
  }
  if (input.signedToday >= policy.x402DailyLimit) {
    return exceeded("over the key's sealed daily x402 authorizations", "x402_daily");
  }
  return null;
}

export type SettlementCheck = X402Terms & {
  validAfter: bigint;
  validBefore: bigint;
  nowSeconds: bigint;
};

/**
 * sign_settlement: the authorization is one the sealed x402 terms allow, valid at the enclave's
 * clock with the sealed margin on both sides (validAfter ≤ now − margin, validBefore ≥ now +
 * margin: the precompile would refuse it otherwise, at the settler's cost) and not valid longer
 * than the sealed maximum. The payer's signature is checked apart (authorization-signature.ts).
 */
export function checkSettlement(policy: Policy | null, input: SettlementCheck): EnclaveFailure | null {
  if (!policy) return NO_X402;
  const terms = checkX402Terms(policy, input);
  if (terms) return terms;
  const margin = BigInt(policy.x402ValidityMarginSeconds);
  if (input.validAfter > input.nowSeconds - margin) {
    return exceeded("authorization not valid yet by the sealed margin", "settlement_window");
  }
  if (input.validBefore < input.nowSeconds + margin) {
    return exceeded("authorization expired or expires within the sealed margin", "settlement_window");
  }
  if (input.validBefore - input.nowSeconds > BigInt(policy.x402MaxTimeoutSeconds)) {
    return exceeded("validity above the maximum", "settlement_window");
  }
  return null;
}

/**
 * The node's x402 rule (docs/enclave.md#the-nodes-x402-ceiling): the sealed pair exactly, or, with
 * a ceiling sealed, any payment up to it to a payee of its list (any payee when it has none). With
 * no ceiling the refusals name the pair's part that differs, as before the ceiling existed.
 */
function checkX402Terms(policy: Policy, input: X402Terms): EnclaveFailure | null {
  const pair = nodePayee(policy);
  const ceiling = policy.x402MaxPerPaymentUnits;
  if (pair === null && ceiling === null) return NO_X402;
  if (input.from.toLowerCase() === policy.operatorPool) return exceeded("payer not allowed", "x402_payer");
  const to = input.to.toLowerCase();
  if (pair && to === pair.payTo && input.valueUnits === pair.amountUnits) return null;
  if (ceiling !== null) {
    // The rule names which of the ceiling's two bounds refused: an origin whose view of the ceiling
    // lags (it reads it at start) still tells its caller the right one.
    if (input.valueUnits > ceiling)
      return {
        ...exceeded("over the node's x402 ceiling", "x402_ceiling"),
        rule: "x402_max_per_payment_units",
      };
    if (policy.x402Payees && !policy.x402Payees.has(to))
      return { ...exceeded("payee not on the node's x402 list", "x402_ceiling"), rule: "x402_payees" };
    return null;
  }
  if (to !== pair!.payTo) return exceeded("payTo differs from policy", "x402_pay_to");
  return exceeded("amount differs from policy", "x402_amount");
}

/**
 * A key without an agent policy pays the sealed pair alone, as the gateway lets it (docs/x402.md):
 * the ceiling's other payments are for the payees an operator's policy lists, so a compromised
 * origin cannot pay an address of its choosing from a wallet nobody gave a policy. Refused as the
 * node's rule without a ceiling refuses, naming the part of the pair that differs.
 */
export function checkPairOnly(policy: Policy, input: X402Terms): EnclaveFailure | null {
  const pair = nodePayee(policy);
  if (pair === null) return NO_X402;
  if (input.to.toLowerCase() !== pair.payTo) return exceeded("payTo differs from policy", "x402_pay_to");
  if (input.valueUnits !== pair.amountUnits) return exceeded("amount differs from policy", "x402_amount");
  return null;
}

/** The sealed pair (x402 amount and payTo) as the agent policy's default payee, or null. */
export function nodePayee(policy: Policy): NodePayee | null {
  if (policy.x402AmountUnits === null || policy.x402PayTo === null) return null;
  return { payTo: policy.x402PayTo, amountUnits: policy.x402AmountUnits };
}

/**
 * The settler's sealed fee budget of the UTC day: the maximum fees of the settlements and fillers
 * it signed today plus this one's (docs/enclave.md#the-settlers-fee-budget).
 */
export function checkSettlerFeeBudget(
  policy: Policy,
  input: { spentTodayUnits: bigint; feeUnits: bigint },
): EnclaveFailure | null {
  if (input.spentTodayUnits + input.feeUnits > policy.settlerDailyFeeUnits) {
    return exceeded("over the settler's sealed fee budget of the day", "settler_fee_budget");
  }
  return null;
}

/**
 * Key binding: the caller names the address it believes the key has (the
 * identity's assigned wallet, the treasury's address); a key with another address is refused, so
 * an identity pointed at another key (a free pool key, say) gets nothing signed by it.
 */
export function checkKeyBinding(keyAddress: string, from: string): EnclaveFailure | null {
  if (keyAddress.toLowerCase() === from.toLowerCase()) return null;
  return {
    code: "key_purpose_mismatch",
    reason: "the key's address is not the given from",
    detail: "key_binding",
  };
}

function checkCommon(policy: Policy, input: TransactionCheck): EnclaveFailure | null {
  if (input.chainId !== input.sealedChainId) return exceeded("chain id not allowed", "chain");
  if (input.to.toLowerCase() === policy.operatorPool) return exceeded("recipient not allowed", "recipient");
  if (input.gasLimit > MAX_GAS_LIMIT) return exceeded("gas limit above the enclave bound", "gas_limit");
  if (input.maxFeeWei > policy.feeCeilingWei) return exceeded("fee above the policy ceiling", "fee_ceiling");
  return null;
}

/**
 * Whether a per-day (or per-month) record of `recorded` still counts at `now` (utcDay or utcMonth,
 * which order as text): the same day, or a later one. A host clock stepped back across midnight and
 * forward again (NTP) would otherwise start a day afresh twice, three days' budget in one; so a day
 * only moves forward, and a clock behind its records keeps counting in theirs.
 */
export function countsAt(recorded: string, now: string): boolean {
  return recorded >= now;
}

/** The UTC day of `date` as YYYY-MM-DD: daily limits reset at UTC midnight. */
export function utcDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

/** The UTC month of `date` as YYYY-MM: an agent policy's monthly budget resets on its first day. */
export function utcMonth(date: Date): string {
  return date.toISOString().slice(0, 7);
}
