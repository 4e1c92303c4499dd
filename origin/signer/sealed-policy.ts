/**
 * The origin reads, never writes, the enclave's sealed policy (an op without a capability returns
 * the sealed policy, so the origin can check its own configuration against it; docs/enclave.md).
 * Logged once at start and shown live on /healthz; the money routes will refuse a switch whose
 * configuration differs from it. Limits and addresses only: get_policy carries no key.
 */
import type { WireGetPolicyResult, WirePolicy } from "../../shared/enclave-ops.ts";
import type { Logger } from "../logger.ts";
import { getPolicyResultToWire } from "./op-codecs.ts";
import type { GetPolicyResult, SignerClient, SignerResult } from "./types.ts";

/** How long the start-up read waits: the origin starts anyway when the enclave is slow or down. */
export const START_POLICY_TIMEOUT_MS = 3_000;

export type EnclavePolicyReport = {
  /** AGENT_SIGNER_SVC_HSM_ENDPOINT is set. */
  configured: boolean;
  ok: boolean;
  ms: number;
  policy_version: number | null;
  policy: WirePolicy | null;
  treasury: WireGetPolicyResult["treasury"];
  /** The failure code (e.g. signer_unreachable), never a message that could carry a path or secret. */
  error?: string;
};

/** Reads get_policy with `timeoutMs` and reports it in wire form (decimal strings, snake_case). */
export async function readEnclavePolicy(
  signer: Pick<SignerClient, "getPolicy">,
  params: { configured: boolean; timeoutMs: number },
): Promise<EnclavePolicyReport> {
  const empty = { policy_version: null, policy: null, treasury: null };
  if (!params.configured) return { configured: false, ok: false, ms: 0, ...empty };
  const started = performance.now();
  const result = await signer.getPolicy({ timeoutMs: params.timeoutMs });
  const ms = Math.round((performance.now() - started) * 10) / 10;
  if (!result.ok) return { configured: true, ok: false, ms, ...empty, error: result.error.code };
  const { policy_version, policy, treasury } = getPolicyResultToWire(result.value);
  return { configured: true, ok: true, ms, policy_version, policy, treasury };
}

/**
 * Start-up: one info line with the sealed policy (version, limits, fee ceiling, allowlist size, x402
 * terms, the settler's fee budget), or a warning when the enclave does not answer; the origin
 * starts either way. Returns what it read, for the money switches' check
 * (origin/startup/money-setup.ts).
 */
export async function logSealedPolicy(
  signer: Pick<SignerClient, "getPolicy">,
  logger: Logger,
  timeoutMs = START_POLICY_TIMEOUT_MS,
): Promise<SignerResult<GetPolicyResult>> {
  const result = await signer.getPolicy({ timeoutMs });
  if (!result.ok) {
    logger.warn(
      { code: result.error.code },
      "enclave policy unavailable at start: starting anyway; /healthz reports it live",
    );
    return result;
  }
  const { policy, policyVersion } = result.value;
  if (!policy) {
    logger.warn({ policy_version: policyVersion }, "enclave has no sealed policy: it signs no transfer");
    return result;
  }
  logger.info(
    {
      policy_version: policyVersion,
      per_tx_limit_units: policy.perTxLimitUnits.toString(),
      daily_limit_units: policy.dailyLimitUnits.toString(),
      fee_ceiling_wei: policy.feeCeilingWei.toString(),
      allowlist_size: policy.recipientAllowlist === null ? null : policy.recipientAllowlist.length,
      x402_amount_units: policy.x402AmountUnits === null ? null : policy.x402AmountUnits.toString(),
      x402_pay_to: policy.x402PayTo,
      x402_validity_margin_seconds: policy.x402ValidityMarginSeconds,
      x402_daily_limit: policy.x402DailyLimit,
      settler_daily_fee_units: policy.settlerDailyFeeUnits.toString(),
    },
    "enclave policy",
  );
  return result;
}
