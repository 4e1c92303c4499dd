/**
 * sign_filler: a transfer of nothing from a key's address to itself, at a nonce the origin names,
 * gas 21000. The chain refused a transaction at that nonce after later ones were signed, and
 * those wait behind the hole for good; this one fills it. It can move no money: the
 * recipient is the sender, the value zero, no calldata. What it costs is its fee, under the sealed
 * ceiling and counted as the key's other transactions count theirs (an agent key's daily limit,
 * the treasury's budget; the settler's gas, as for sign_settlement, only by the ceiling), so a
 * compromised origin gains nothing from it and can burn no more than the limits it already has.
 */

import type { EnclaveFailure } from "../../shared/enclave-protocol.ts";
import { costUnits, maxFeeWei } from "../../shared/fees.ts";
import type { Hex } from "../../shared/hex.ts";
import { err } from "../../shared/result.ts";
import { KEY_NOT_USABLE, refuse, succeed } from "../outcome.ts";
import { checkKeyBinding, utcDay } from "../policy-checks.ts";
import { prepareTransfer, signPrepared } from "../transaction.ts";
import type { OpHandler } from "./handler.ts";

const FILLER_GAS = 21_000n;

const exceeded = (reason: string, detail: EnclaveFailure["detail"]): { ok: false; error: EnclaveFailure } =>
  err({ code: "cap_exceeded", reason, detail });

export const signFiller: OpHandler<"sign_filler"> = async (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  const { state } = ctx.state;
  const usable =
    key?.namespace === "agent-transfer" ||
    (key?.namespace === "faucet" && state.treasury?.faucetKeyRef === key.keyRef) ||
    (key?.namespace === "settler" && state.settlerKeyRef === key.keyRef);
  if (!key || !usable) return KEY_NOT_USABLE;
  const binding = checkKeyBinding(key.address, params.from);
  if (binding) return err(binding);
  const { policy } = state;
  if (!policy) return refuse("not_configured", "signing policy is not configured");
  if (params.chain_id !== ctx.config.chain_id) return exceeded("chain id not allowed", "chain");
  if (BigInt(params.nonce) > BigInt(Number.MAX_SAFE_INTEGER))
    return refuse("malformed", "nonce out of range");
  const fee = { gasLimit: FILLER_GAS, maxFeePerGas: BigInt(params.max_fee_per_gas) };
  if (maxFeeWei(fee) > policy.feeCeilingWei) return exceeded("fee above the policy ceiling", "fee_ceiling");
  const units = costUnits({ ...fee, valueUnits: 0n });
  const today = utcDay(ctx.now());
  const spentToday = state.daily.day === today ? (state.daily.spent.get(key.keyRef) ?? 0n) : 0n;
  if (key.namespace === "agent-transfer" && spentToday + units > policy.dailyLimitUnits) {
    return exceeded("over the daily limit", "daily");
  }
  if (key.namespace === "faucet" && state.treasury!.spentUnits + units > state.treasury!.budgetUnits) {
    return exceeded("over the faucet budget", "faucet_budget");
  }
  const prepared = prepareTransfer({
    chainId: ctx.config.chain_id,
    nonce: Number(params.nonce),
    to: key.address as Hex,
    valueWei: 0n,
    maxFeePerGas: fee.maxFeePerGas,
    maxPriorityFeePerGas: BigInt(params.max_priority_fee_per_gas),
    gasLimit: FILLER_GAS,
  });
  if (!prepared) return refuse("malformed", "transaction fields out of range");
  // No await between the checks above and this reservation, as for sign_transfer.
  await ctx.state.commit((next) => {
    if (key.namespace === "agent-transfer") {
      if (next.daily.day !== today) next.daily = { day: today, spent: new Map() };
      next.daily.spent.set(key.keyRef, spentToday + units);
    } else if (key.namespace === "faucet" && next.treasury) {
      next.treasury.spentUnits += units;
    }
  });
  const tx = signPrepared(key.privateKey, prepared);
  return succeed({ raw_transaction: tx.rawTransaction, tx_hash: tx.txHash });
};
