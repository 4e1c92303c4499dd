/**
 * sign_filler: a transfer of nothing from a key's address to itself, at a nonce the origin names,
 * gas 21000. A transaction of ours at that nonce was refused or is stuck, and those signed after it
 * wait behind it; this one takes its nonce. It can move no money: the recipient is the sender, the
 * value zero, no calldata. It is signed only at a nonce the enclave signed a transaction of this
 * key at, and once per key and nonce (docs/enclave.md#fillers-and-the-nonce-record), so fillers add
 * no transaction to the chain beyond those already counted. What it costs is its fee, under the
 * sealed ceiling and counted as the key's other transactions count theirs (an agent key's daily
 * limit, the treasury's budget, the settler's fee budget of the day; an agent key with a policy,
 * that policy's transfer units of the day and month too), so a compromised origin can burn no more
 * than the limits it already has. A filler is never held nor frozen: it moves nothing.
 */

import type { EnclaveFailure } from "../../shared/enclave-protocol.ts";
import { costUnits, maxFeeWei } from "../../shared/fees.ts";
import type { Hex } from "../../shared/hex.ts";
import { err } from "../../shared/result.ts";
import { fillerRefusal } from "../agent-policy-checks.ts";
import { countTransfer, usageOn } from "../agent-usage.ts";
import { countSpend, spentToday } from "../daily-spend.ts";
import { fillerRefusal as nonceRefusalOf, recordFilledNonce } from "../nonce-record.ts";
import { KEY_NOT_USABLE, refuse, succeed } from "../outcome.ts";
import { checkKeyBinding, checkSettlerFeeBudget, utcDay, utcMonth } from "../policy-checks.ts";
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
  const nonce = Number(params.nonce);
  const nonceRefusal = nonceRefusalOf(state.nonces, key.keyRef, nonce);
  if (nonceRefusal === "filler_nonce") {
    return exceeded("no transaction of this key was signed at this nonce", "filler_nonce");
  }
  if (nonceRefusal === "filler_repeat") {
    return exceeded("a filler of this key was already signed at this nonce", "filler_repeat");
  }
  const fee = { gasLimit: FILLER_GAS, maxFeePerGas: BigInt(params.max_fee_per_gas) };
  if (maxFeeWei(fee) > policy.feeCeilingWei) return exceeded("fee above the policy ceiling", "fee_ceiling");
  const units = costUnits({ ...fee, valueUnits: 0n });
  const now = ctx.now();
  const today = utcDay(now);
  const spent = spentToday(state, key.keyRef, today);
  if (key.namespace === "agent-transfer" && spent + units > policy.dailyLimitUnits) {
    return exceeded("over the daily limit", "daily");
  }
  const at = { day: today, month: utcMonth(now) };
  const agent = key.namespace === "agent-transfer" ? state.agentPolicies.get(key.keyRef) : undefined;
  if (agent?.policy) {
    const refusal = fillerRefusal(agent.policy, usageOn(agent.usage, at.day, at.month), units);
    if (refusal) return err(refusal);
  }
  if (key.namespace === "faucet" && state.treasury!.spentUnits + units > state.treasury!.budgetUnits) {
    return exceeded("over the faucet budget", "faucet_budget");
  }
  if (key.namespace === "settler") {
    const budget = checkSettlerFeeBudget(policy, { spentTodayUnits: spent, feeUnits: units });
    if (budget) return err(budget);
  }
  const prepared = prepareTransfer({
    chainId: ctx.config.chain_id,
    nonce,
    to: key.address as Hex,
    valueWei: 0n,
    maxFeePerGas: fee.maxFeePerGas,
    maxPriorityFeePerGas: BigInt(params.max_priority_fee_per_gas),
    gasLimit: FILLER_GAS,
  });
  if (!prepared) return refuse("malformed", "transaction fields out of range");
  // No await between the checks above and this reservation, as for sign_transfer.
  // The day the fee counted on, which the origin counts an agent's filler on too; none for the
  // treasury, whose budget has no day.
  let countedOn: string | undefined;
  await ctx.state.commit((next) => {
    if (key.namespace === "faucet" && next.treasury) next.treasury.spentUnits += units;
    else {
      countSpend(next, key.keyRef, today, units);
      // A later day than today's when the clock stepped back since: the spend stays on it.
      countedOn = next.daily.day;
    }
    recordFilledNonce(next.nonces, key.keyRef, nonce);
    const counted = key.namespace === "agent-transfer" ? next.agentPolicies.get(key.keyRef) : undefined;
    if (counted?.policy) countTransfer(counted.usage, at, units, false);
  });
  const tx = signPrepared(key.privateKey, prepared);
  return succeed({
    raw_transaction: tx.rawTransaction,
    tx_hash: tx.txHash,
    ...(countedOn === undefined ? {} : { counted_on: countedOn }),
  });
};
