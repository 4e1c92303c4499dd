/**
 * sign_x402_authorization: the enclave builds the EIP-712 TransferWithAuthorization digest itself
 * (docs/x402.md) and signs only the configured amount and payTo, from the key the caller
 * names as `from` (key binding), within the maximum validity and outside the sealed margin, and
 * within the key's sealed count of authorizations for the UTC day; beside the sealed pair, any
 * payment the node's x402 ceiling allows to a key whose agent policy allows it too (both must
 * allow; a key without a policy, the pair alone, policy-checks.ts checkPairOnly). A frozen node
 * signs none. The count is on disk before the
 * signature leaves, as the transfer spend is (sign-transaction.ts): a crash can only over-count.
 * The precompile's (from, nonce) rule prevents double settlement.
 */
import type { Address } from "viem";
import { evaluateX402 } from "../../shared/agent-policy.ts";
import { transferWithAuthorizationDigest } from "../../shared/eip712.ts";
import type { Hex } from "../../shared/hex.ts";
import { fromHex } from "../../shared/hex.ts";
import { heldActionSubject } from "../../shared/operator-approval.ts";
import { err } from "../../shared/result.ts";
import { signDigest } from "../../shared/secp256k1.ts";
import { approvalHeld, decisionRefusal, NODE_FROZEN, pruneHeldApprovals } from "../agent-policy-checks.ts";
import { countX402, usageOn } from "../agent-usage.ts";
import { KEY_NOT_USABLE, succeed } from "../outcome.ts";
import {
  checkKeyBinding,
  checkPairOnly,
  checkX402,
  countsAt,
  nodePayee,
  utcDay,
  utcMonth,
} from "../policy-checks.ts";
import { TrackedMap } from "../tracked-map.ts";
import type { OpHandler } from "./handler.ts";

export const signX402Authorization: OpHandler<"sign_x402_authorization"> = async (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  if (key?.namespace !== "agent-transfer") return KEY_NOT_USABLE;
  const binding = checkKeyBinding(key.address, params.from);
  if (binding) return err(binding);
  const valueUnits = BigInt(params.value_units);
  const validAfter = BigInt(params.valid_after);
  const validBefore = BigInt(params.valid_before);
  const now = ctx.now();
  const today = utcDay(now);
  const { x402Daily } = ctx.state.state;
  const signedToday = countsAt(x402Daily.day, today) ? (x402Daily.signed.get(key.keyRef) ?? 0) : 0;
  const refusal = checkX402(ctx.state.state.policy, {
    from: key.address,
    to: params.to,
    valueUnits,
    validAfter,
    validBefore,
    nowSeconds: BigInt(Math.floor(now.getTime() / 1000)),
    signedToday,
  });
  if (refusal) return err(refusal);
  const { state } = ctx.state;
  if (state.nodeFrozen) return err(NODE_FROZEN);
  // The key's own policy, where it has one; a key without one is held to the node's rule alone.
  const record = state.agentPolicies.get(key.keyRef);
  const month = utcMonth(now);
  let approval: string | null = null;
  if (!record?.policy) {
    // checkX402 returned null, so a policy is sealed.
    const pairOnly = checkPairOnly(state.policy!, { from: key.address, to: params.to, valueUnits });
    if (pairOnly) return err(pairOnly);
  } else {
    const subject =
      state.heldApprovals.size === 0
        ? null
        : heldActionSubject({
            instanceId: ctx.config.instance_id,
            keyRef: key.keyRef,
            kind: "x402",
            ref: params.nonce,
            to: params.to,
            valueUnits,
          });
    const approved = subject !== null && approvalHeld(state, subject, now.getTime());
    const decision = evaluateX402(
      record.policy,
      usageOn(record.usage, today, month),
      // checkX402 returned null, so a policy is sealed.
      nodePayee(state.policy!),
      { payTo: params.to, amountUnits: valueUnits, resource: null },
      { nodeFrozen: state.nodeFrozen, approved },
    );
    const policyRefusal = decisionRefusal(decision);
    if (policyRefusal) return err(policyRefusal);
    if (approved) approval = subject;
  }
  // No await between the checks above and this count: concurrent requests see each other.
  let countedOn = today;
  await ctx.state.commit((next) => {
    if (!countsAt(next.x402Daily.day, today)) next.x402Daily = { day: today, signed: new TrackedMap() };
    // A later day than today's when the clock stepped back since: the count stays on it.
    countedOn = next.x402Daily.day;
    next.x402Daily.signed.set(key.keyRef, signedToday + 1);
    const counted = next.agentPolicies.get(key.keyRef);
    if (counted?.policy) {
      countX402(counted.usage, { day: today, month }, params.to, valueUnits);
      if (approval !== null) next.heldApprovals.delete(approval);
      if (next.heldApprovals.size > 0) pruneHeldApprovals(next, now.getTime());
    }
  });
  const digest = transferWithAuthorizationDigest(
    {
      from: key.address,
      to: params.to as Address,
      value: valueUnits,
      validAfter,
      validBefore,
      nonce: params.nonce as Hex,
    },
    ctx.config.chain_id,
  );
  const { signature } = signDigest(fromHex(digest), key.privateKey);
  return succeed({
    signature,
    authorization: {
      from: key.address,
      to: params.to,
      value: params.value_units,
      valid_after: params.valid_after,
      valid_before: params.valid_before,
      nonce: params.nonce,
    },
    counted_on: countedOn,
  });
};
