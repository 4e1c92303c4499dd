/**
 * The local stack's signing policy and faucet treasury, in one place: the money routes derive the
 * origin's local transfer limits from these values, so the origin's configuration and the sealed
 * policy cannot drift apart. Applied through the operator CLI's code path (../ops/lib/policy-admin.ts) with
 * the local policy key, only when the sealed policy differs, so restarts change nothing.
 */
import type { Address } from "viem";
import { DEV_OPERATOR_POOL_ADDRESS } from "../devnet/constants.ts";
import {
  applyPolicy,
  applySettler,
  applyTreasury,
  type PolicyAdminResult,
  samePolicy,
} from "../ops/lib/policy-admin.ts";
import { readAuthoritySecret } from "../origin/signer/capability-minter.ts";
import { createSocketSignerClient } from "../origin/signer/socket-client.ts";
import type { FaucetTerms, GetPolicyResult, SignerPolicy } from "../origin/signer/types.ts";

/**
 * An address nobody holds a key to, for tools that run their own demo's terms (bench, soak). The
 * local stack's demo is paid to the enclave's payee key instead (ensureLocalPolicy), so its offers
 * and receipts are signed (docs/x402.md#offers-and-receipts).
 */
export const LOCAL_X402_PAY_TO = "0x4020000000000000000000000000000000000402" as Address;
/** The demo quote's amount, 0.01 USDC (docs/api.md, "The demo quote's amount"). */
export const LOCAL_X402_AMOUNT_UNITS = 10_000n;

/**
 * Small local limits (docs/configuration.md, "The local stack"): 10 USDC per transaction, 100 USDC a day,
 * fees up to 0.001 USDC, 20 USDC of settler fees a day.
 */
export const LOCAL_POLICY: SignerPolicy = {
  perTxLimitUnits: 10_000_000n,
  dailyLimitUnits: 100_000_000n,
  recipientAllowlist: null,
  // The x402 demo resource's terms: 0.01 USDC to the local payee.
  x402AmountUnits: LOCAL_X402_AMOUNT_UNITS,
  x402PayTo: LOCAL_X402_PAY_TO,
  x402MaxTimeoutSeconds: 180,
  operatorPool: DEV_OPERATOR_POOL_ADDRESS.toLowerCase() as Address,
  feeCeilingWei: 10n ** 15n,
  // The origin's defaults (AGENT_X402_VALIDITY_MARGIN_SECONDS, AGENT_X402_DAILY_LIMIT).
  x402ValidityMarginSeconds: 6,
  x402DailyLimit: 1_000,
  // 20 USDC of settler fees a day, a fifth of its local float (dev/local-money.ts): at least
  // 20,000 settlements a day at the fee ceiling, and the most a compromised origin burns in one.
  settlerDailyFeeUnits: 20_000_000n,
  // The node's x402 ceiling: 1 USDC per payment to any payee, so a local agent's policy can name
  // any seller (docs/enclave.md#the-nodes-x402-ceiling); without a policy, the pair above alone.
  // No payee list (x402Payees left out): any payee, as the enclave answers it back.
  x402MaxPerPaymentUnits: 1_000_000n,
};

/** 1000 USDC of faucet payouts (value plus maximum fee) before the treasury needs a new budget. */
export const LOCAL_TREASURY_BUDGET_UNITS = 1_000_000_000n;

/**
 * The local faucet (docs/agents.md): 1 USDC a minute, 10 USDC a day, per agent; the origin is given the same.
 */
export const LOCAL_FAUCET_TERMS: FaucetTerms = {
  payoutUnits: 1_000_000n,
  cooldownMs: 60_000,
  dailyLimitUnits: 10_000_000n,
};

/** LOCAL_POLICY with the demo paid to `payTo` (the enclave's payee key, for the local stack). */
export function localPolicyPaying(payTo: Address): SignerPolicy {
  return { ...LOCAL_POLICY, x402PayTo: payTo.toLowerCase() as Address };
}

/**
 * Applies LOCAL_POLICY, paying the demo to the enclave's payee key, if the sealed one differs, a treasury if none is configured or its payout
 * terms are not LOCAL_FAUCET_TERMS, and a settler if none is configured.
 */
export async function ensureLocalPolicy(params: {
  socketPath: string;
  policyKeyFile: string;
  onLine: (line: string) => void;
}): Promise<GetPolicyResult> {
  const client = createSocketSignerClient({ socketPath: params.socketPath });
  try {
    const policySecret = await readAuthoritySecret(params.policyKeyFile);
    const sealed = await client.getPolicy();
    if (!sealed.ok) throw new Error(`local get_policy failed (${sealed.error.code}: ${sealed.error.reason})`);
    let current = sealed.value;
    // The enclave makes its payee key at init (or at its first start after an upgrade).
    const payee = current.payee?.payeeAddress;
    if (!payee) throw new Error("local enclave has no x402 payee key");
    const policy = localPolicyPaying(payee);
    if (!samePolicy(current.policy, policy)) {
      current = expectApplied(
        "configure_policy",
        await applyPolicy({ client, policySecret, changes: policy }),
      );
      params.onLine(`policy     local policy applied (version ${current.policyVersion})`);
    }
    if (!sameTerms(current.treasury?.terms ?? null, LOCAL_FAUCET_TERMS)) {
      // Keeps the faucet key of a treasury sealed before its terms were (its float stays usable).
      current = expectApplied(
        "configure_treasury",
        await applyTreasury({
          client,
          policySecret,
          budgetUnits: LOCAL_TREASURY_BUDGET_UNITS,
          terms: LOCAL_FAUCET_TERMS,
        }),
      );
      params.onLine(
        `treasury   faucet ${current.treasury?.faucetAddress} budget ${LOCAL_TREASURY_BUDGET_UNITS} units, ` +
          `${LOCAL_FAUCET_TERMS.payoutUnits} a payout, every ${LOCAL_FAUCET_TERMS.cooldownMs / 1000} s, ` +
          `${LOCAL_FAUCET_TERMS.dailyLimitUnits} a day per agent`,
      );
    }
    if (!current.settler) {
      current = expectApplied("configure_settler", await applySettler({ client, policySecret }));
      params.onLine(`settler    x402 settler ${current.settler?.settlerAddress}`);
    }
    return current;
  } finally {
    await client.close();
  }
}

function sameTerms(sealed: FaucetTerms | null, terms: FaucetTerms): boolean {
  return (
    sealed !== null &&
    sealed.payoutUnits === terms.payoutUnits &&
    sealed.cooldownMs === terms.cooldownMs &&
    sealed.dailyLimitUnits === terms.dailyLimitUnits
  );
}

function expectApplied(step: string, result: PolicyAdminResult): GetPolicyResult {
  if (result.ok) return result.value.after;
  const detail =
    result.error.code === "usage"
      ? result.error.message
      : `${result.error.failure.code}: ${result.error.failure.reason}`;
  throw new Error(`local ${step} failed (${detail})`);
}
