/**
 * The start-up check of the money switches (the faucet, transfers and x402), run by compose.ts
 * before any capability is built: a money switch turns on only when this node's limits are the
 * enclave's sealed ones. The enclave re-checks every signature under its policy anyway; a node
 * configured otherwise would promise agents limits the signer does not keep, so it refuses to
 * start, naming each difference. The origin reads the policy and never writes it. The check builds
 * nothing: it answers with the sealed policy it matched, which the composition root builds the
 * outbox, the money runtime and the settler from.
 */
import { CHAIN_ID } from "../../shared/constants.ts";
import { err, ok } from "../../shared/result.ts";
import type { StartupCheck } from "../capability.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { Config } from "../config.ts";
import type { GetPolicyResult, SignerClient, SignerResult } from "../signer/types.ts";
import { x402PolicyDifferences } from "../x402/setup.ts";

/**
 * The sealed policy a node's money switches were matched to, and the chain they run on; undefined
 * when no money switch is on.
 */
export type CheckedMoney = { sealed: GetPolicyResult; rpc: JsonRpcUpstream } | undefined;

/** The sealed policy the switches match, or each reason they cannot be turned on. */
export type CheckMoneyResult = StartupCheck<CheckedMoney>;

/** True when a switch that signs money transactions is on (x402 settles through the settler). */
export function moneySwitchOn(config: Config): boolean {
  return config.features.faucet || config.features.transfers || config.features.x402;
}

/** The money switches that are on, as a message names them ("A", "A or B", "A, B or C"). */
function moneySwitchesOn(config: Config): string {
  const on = [
    config.features.faucet && "AGENT_FAUCET_ENABLED",
    config.features.transfers && "AGENT_TRANSFER_ENABLED",
    config.features.x402 && "AGENT_X402_ENABLED",
  ].filter((name): name is string => Boolean(name));
  return on.length > 1 ? `${on.slice(0, -1).join(", ")} or ${on.at(-1)}` : on.join("");
}

/**
 * Reads the sealed policy and matches the money switches to it, or lists why they cannot be
 * turned on. With no money switch on there is nothing to check.
 */
export async function checkMoney(params: {
  config: Config;
  signer: Pick<SignerClient, "getPolicy">;
  rpc: JsonRpcUpstream | undefined;
  /** The policy already read at start, if it was (main.ts logs it first). */
  sealed?: SignerResult<GetPolicyResult> | undefined;
}): Promise<CheckMoneyResult> {
  const { config } = params;
  if (!moneySwitchOn(config)) return ok(undefined);
  const errors: string[] = [];
  const required = `required when ${moneySwitchesOn(config)} is true`;
  if (!params.rpc) errors.push(`CHAIN_RPC_URL: ${required}`);
  if (!config.signer.endpoint) errors.push(`AGENT_SIGNER_SVC_HSM_ENDPOINT: ${required}`);
  if (!config.operatorPool) errors.push(`AGENT_OPERATOR_POOL_ADDRESS: ${required}`);
  if (errors.length > 0 || !params.rpc) return err(errors);
  const sealed = params.sealed ?? (await params.signer.getPolicy({ timeoutMs: 5_000 }));
  if (!sealed.ok) {
    return err([
      `cannot read the enclave's sealed policy (${sealed.error.code}: ${sealed.error.reason}); the money switches stay off`,
    ]);
  }
  const differences = [
    ...policyDifferences(config, sealed.value),
    ...x402PolicyDifferences(config, sealed.value),
  ];
  if (differences.length > 0) return err(differences);
  return ok({ sealed: sealed.value, rpc: params.rpc });
}

/** Every way this node's money configuration differs from the sealed policy, one line each. */
export function policyDifferences(config: Config, sealed: GetPolicyResult): string[] {
  const differences: string[] = [];
  const mismatch = (name: string, ours: string, theirs: string): void => {
    if (ours !== theirs)
      differences.push(`${name} is ${ours} but the enclave's sealed policy says ${theirs}`);
  };
  if (sealed.chainId !== CHAIN_ID)
    differences.push(`the enclave is sealed for chain ${sealed.chainId}, not ${CHAIN_ID}`);
  if (sealed.envId !== config.envId) mismatch("AGENT_ENV_ID", config.envId, sealed.envId);
  const policy = sealed.policy;
  if (!policy) {
    differences.push("the enclave has no sealed policy: apply one with `npm run enclave-policy -- apply`");
    return differences;
  }
  mismatch("AGENT_OPERATOR_POOL_ADDRESS", config.operatorPool ?? "unset", policy.operatorPool.toLowerCase());
  if (config.features.transfers) {
    mismatch(
      "AGENT_TRANSFER_PER_TX_LIMIT",
      String(config.transfers.perTxLimitUnits),
      String(policy.perTxLimitUnits),
    );
    mismatch(
      "AGENT_TRANSFER_DAILY_LIMIT",
      String(config.transfers.dailyLimitUnits),
      String(policy.dailyLimitUnits),
    );
    mismatch(
      "AGENT_TRANSFER_RECIPIENT_ALLOWLIST",
      describeAllowlist(config.transfers.recipientAllowlist ?? null),
      describeAllowlist(policy.recipientAllowlist),
    );
  }
  if (config.features.faucet) differences.push(...faucetDifferences(config, sealed));
  return differences;
}

/**
 * The faucet's payout, cooldown and daily units are sealed with the treasury and enforced by the
 * enclave; the node checks them first for its clear 429s, so they must be the same numbers.
 */
function faucetDifferences(config: Config, sealed: GetPolicyResult): string[] {
  const treasury = sealed.treasury;
  if (!treasury) {
    return [
      "AGENT_FAUCET_ENABLED is true but the enclave has no faucet treasury: `npm run enclave-policy -- treasury`",
    ];
  }
  if (!treasury.terms) {
    return [
      "AGENT_FAUCET_ENABLED is true but the enclave's faucet treasury has no sealed payout terms: `npm run enclave-policy -- treasury --payout … --cooldown-ms … --payout-daily …`",
    ];
  }
  const differences: string[] = [];
  const mismatch = (name: string, ours: string, theirs: string): void => {
    if (ours !== theirs)
      differences.push(`${name} is ${ours} but the enclave's sealed treasury says ${theirs}`);
  };
  const { faucet } = config;
  mismatch("AGENT_FAUCET_PAYOUT_AMOUNT", String(faucet.payoutUnits), String(treasury.terms.payoutUnits));
  mismatch("AGENT_FAUCET_COOLDOWN_MS", String(faucet.cooldownMs), String(treasury.terms.cooldownMs));
  mismatch(
    "AGENT_FAUCET_DAILY_LIMIT",
    String(faucet.dailyLimitUnits),
    String(treasury.terms.dailyLimitUnits),
  );
  return differences;
}

function describeAllowlist(list: readonly string[] | null): string {
  if (!list) return "unset (any recipient)";
  return [...new Set(list.map((address) => address.toLowerCase()))].sort().join(",") || "empty";
}
