/**
 * sign_transfer (agent-transfer keys, per-tx and daily limits, the node's freeze and the key's own
 * agent policy with the approval of a held transfer) and sign_faucet (the configured
 * faucet key, the sealed payout terms and budget). Order: key and its binding to `from`, fields
 * (serialized before anything else), policy, durable spend reservation (with the nonce signed at,
 * for sign_filler), signature. The spend is on disk before the signature exists, so a crash can
 * only over-count, never let a signed transaction escape its limit. What is counted is value plus
 * the maximum fee, computed by shared/fees.ts as the origin computes it.
 */
import type { Address } from "viem";
import { evaluateTransfer } from "../../shared/agent-policy.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { WireParams } from "../../shared/enclave-ops.ts";
import { costUnits, type FeeFields, maxFeeWei } from "../../shared/fees.ts";
import { heldActionSubject } from "../../shared/operator-approval.ts";
import { err } from "../../shared/result.ts";
import { approvalHeld, decisionRefusal, NODE_FROZEN, pruneHeldApprovals } from "../agent-policy-checks.ts";
import { countTransfer, usageOn } from "../agent-usage.ts";
import { countSpend, spentToday } from "../daily-spend.ts";
import type { EnclaveState } from "../enclave-state.ts";
import { recordSignedNonce } from "../nonce-record.ts";
import { KEY_NOT_USABLE, type OpOutcome, refuse, succeed } from "../outcome.ts";
import type { FaucetTerms } from "../policy.ts";
import { checkFaucet, checkKeyBinding, checkTransfer, utcDay, utcMonth } from "../policy-checks.ts";
import { type PreparedTransfer, prepareTransfer, signPrepared } from "../transaction.ts";
import type { OpHandler } from "./handler.ts";

type TxParams = WireParams<"sign_transfer">;
type TxResult = { raw_transaction: string; tx_hash: string };

/** Intrinsic gas of a transaction: below it no node would accept the transfer. */
const MIN_GAS_LIMIT = 21_000n;

export const signTransfer: OpHandler<"sign_transfer"> = async (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  if (key?.namespace !== "agent-transfer") return KEY_NOT_USABLE;
  const binding = checkKeyBinding(key.address, params.from);
  if (binding) return err(binding);
  const prepared = prepare(params, ctx.config.chain_id);
  if (!prepared.ok) return prepared;
  const cost = transactionCost(params);
  const now = ctx.now();
  const today = utcDay(now);
  const { state } = ctx.state;
  const spent = spentToday(state, key.keyRef, today);
  const refusal = checkTransfer(state.policy, {
    sealedChainId: ctx.config.chain_id,
    chainId: params.chain_id,
    to: params.to,
    gasLimit: cost.gasLimit,
    maxFeeWei: cost.maxFeeWei,
    costUnits: cost.units,
    spentTodayUnits: spent,
  });
  if (refusal) return err(refusal);
  const agent = checkAgentTransfer(state, {
    instanceId: ctx.config.instance_id,
    keyRef: key.keyRef,
    params,
    costUnits: cost.units,
    now,
  });
  if (!agent.ok) return agent;
  // No await between the checks above and this reservation: concurrent requests see each other.
  let countedOn = today;
  await ctx.state.commit((next) => {
    countSpend(next, key.keyRef, today, cost.units);
    // A later day than today's when the clock stepped back since: the spend stays on it.
    countedOn = next.daily.day;
    recordSignedNonce(next.nonces, key.keyRef, Number(params.nonce), now.getTime());
    countAgentTransfer(next, key.keyRef, agent.value, { units: cost.units, now });
  });
  return signed(key.privateKey, prepared.value, countedOn);
};

/** What the agent policy's re-check found: which approval it used, if one. */
type AgentTransferCheck = { approval: string | null };

/**
 * The node's freeze and the key's agent policy (docs/enclave.md#agent-policies-operator-keys-and-approvals):
 * a key without a policy is held to the node's limits alone, as before policies existed.
 */
function checkAgentTransfer(
  state: EnclaveState,
  input: { instanceId: string; keyRef: string; params: TxParams; costUnits: bigint; now: Date },
): OpOutcome<AgentTransferCheck> {
  if (state.nodeFrozen) return err(NODE_FROZEN);
  const policy = state.agentPolicies.get(input.keyRef)?.policy;
  if (!policy) return succeed({ approval: null });
  const { params, now } = input;
  const subject =
    params.action_id === undefined || state.heldApprovals.size === 0
      ? null
      : heldActionSubject({
          instanceId: input.instanceId,
          keyRef: input.keyRef,
          kind: "transfer",
          ref: params.action_id,
          to: params.to,
          valueUnits: BigInt(params.value_units),
        });
  const approved = subject !== null && approvalHeld(state, subject, now.getTime());
  const record = state.agentPolicies.get(input.keyRef)!;
  const decision = evaluateTransfer(
    policy,
    usageOn(record.usage, utcDay(now), utcMonth(now)),
    { to: params.to, costUnits: input.costUnits },
    { nodeFrozen: state.nodeFrozen, approved },
  );
  const refusal = decisionRefusal(decision);
  if (refusal) return err(refusal);
  return succeed({ approval: approved ? subject : null });
}

/** Counts a signed transfer in its key's policy usage and uses up the approval it signed under. */
function countAgentTransfer(
  state: EnclaveState,
  keyRef: string,
  check: AgentTransferCheck,
  spend: { units: bigint; now: Date },
): void {
  const record = state.agentPolicies.get(keyRef);
  if (!record?.policy) return;
  countTransfer(record.usage, { day: utcDay(spend.now), month: utcMonth(spend.now) }, spend.units, true);
  if (check.approval !== null) state.heldApprovals.delete(check.approval);
  if (state.heldApprovals.size > 0) pruneHeldApprovals(state, spend.now.getTime());
}

export const signFaucet: OpHandler<"sign_faucet"> = async (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  if (key?.namespace !== "faucet") return KEY_NOT_USABLE;
  const { treasury, policy } = ctx.state.state;
  if (!treasury) return refuse("not_configured", "treasury is not configured");
  if (treasury.faucetKeyRef !== key.keyRef) return KEY_NOT_USABLE;
  const binding = checkKeyBinding(key.address, params.from);
  if (binding) return err(binding);
  const prepared = prepare(params, ctx.config.chain_id);
  if (!prepared.ok) return prepared;
  const cost = transactionCost(params);
  const now = ctx.now();
  const today = utcDay(now);
  const recipient = params.to.toLowerCase();
  const valueUnits = BigInt(params.value_units);
  const nonce = Number(params.nonce);
  const paid = ctx.state.state.faucetPayouts.get(recipient);
  // The recipient's last payout asked for again at its own nonce: its answer never got stored (an
  // origin killed in between, an answer lost). The treasury has one transaction at a nonce mined at
  // most, so signing it again pays nothing twice, and the cooldown and day it counted stand; refused,
  // the agent would wait out a cooldown for a payout it never got. The budget counts it again.
  const again = paid?.nonce === nonce;
  const refusal = checkFaucet(policy, treasury, {
    sealedChainId: ctx.config.chain_id,
    chainId: params.chain_id,
    to: params.to,
    gasLimit: cost.gasLimit,
    maxFeeWei: cost.maxFeeWei,
    costUnits: cost.units,
    valueUnits,
    toIsAgentKey: ctx.keystore.holdsAddress("agent-transfer", recipient),
    paid: again ? undefined : paid,
    nowMs: now.getTime(),
    today,
  });
  if (refusal) return err(refusal);
  // checkFaucet refuses a treasury without terms.
  const terms = treasury.terms!;
  // As above: checked and reserved in one synchronous step, the recipient's payout with the budget.
  await ctx.state.commit((next) => {
    if (next.treasury) next.treasury.spentUnits += cost.units;
    if (!again) recordPayout(next, { recipient, valueUnits, nonce, nowMs: now.getTime(), today, terms });
    recordSignedNonce(next.nonces, key.keyRef, nonce, now.getTime());
  });
  return signed(key.privateKey, prepared.value);
};

/**
 * Counts a payout against its recipient, and forgets the recipients whose records no longer bound
 * anything (another day's units, a cooldown run out), so the record stays as small as the set of
 * recipients that can still be refused.
 */
function recordPayout(
  state: EnclaveState,
  payout: {
    recipient: string;
    valueUnits: bigint;
    nonce: number;
    nowMs: number;
    today: string;
    terms: FaucetTerms;
  },
): void {
  const { recipient, valueUnits, nonce, nowMs, today, terms } = payout;
  for (const [address, paid] of state.faucetPayouts) {
    if (paid.day !== today && nowMs - paid.lastPayoutMs >= terms.cooldownMs)
      state.faucetPayouts.delete(address);
  }
  const before = state.faucetPayouts.get(recipient);
  const unitsToday = before?.day === today ? before.unitsToday : 0n;
  state.faucetPayouts.set(recipient, {
    lastPayoutMs: nowMs,
    nonce,
    day: today,
    unitsToday: unitsToday + valueUnits,
  });
}

type TransactionCost = { gasLimit: bigint; maxFeeWei: bigint; units: bigint };

/** The request's maximum fee and its cost in units (value + ceil(max fee / 10^12)). */
function transactionCost(params: TxParams): TransactionCost {
  const fee: FeeFields = { gasLimit: BigInt(params.gas_limit), maxFeePerGas: BigInt(params.max_fee_per_gas) };
  return {
    gasLimit: fee.gasLimit,
    maxFeeWei: maxFeeWei(fee),
    units: costUnits({ ...fee, valueUnits: BigInt(params.value_units) }),
  };
}

/** Field checks that make a request malformed rather than over policy. */
function prepare(params: TxParams, sealedChainId: number): OpOutcome<PreparedTransfer> {
  if (BigInt(params.nonce) > BigInt(Number.MAX_SAFE_INTEGER))
    return refuse("malformed", "nonce out of range");
  if (BigInt(params.gas_limit) < MIN_GAS_LIMIT) return refuse("malformed", "gas limit below 21000");
  const prepared = prepareTransfer({
    // The sealed chain id is signed; a request for another chain is refused by policy after this.
    chainId: sealedChainId,
    nonce: Number(params.nonce),
    to: params.to as Address,
    // One 6-decimal unit is 10^12 wei on chain.
    valueWei: BigInt(params.value_units) * WEI_PER_UNIT,
    maxFeePerGas: BigInt(params.max_fee_per_gas),
    maxPriorityFeePerGas: BigInt(params.max_priority_fee_per_gas),
    gasLimit: BigInt(params.gas_limit),
  });
  return prepared ? succeed(prepared) : refuse("malformed", "transaction fields out of range");
}

function signed(privateKey: Uint8Array, prepared: PreparedTransfer, countedOn?: string): OpOutcome<TxResult> {
  const tx = signPrepared(privateKey, prepared);
  return succeed({
    raw_transaction: tx.rawTransaction,
    tx_hash: tx.txHash,
    ...(countedOn === undefined ? {} : { counted_on: countedOn }),
  });
}
