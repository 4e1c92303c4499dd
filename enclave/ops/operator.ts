/**
 * The operator's part of agent policies (docs/enclave.md#agent-policies-operator-keys-and-approvals):
 * enroll_operator_key (policy tier) enrolls a P-256 key; set_node_frozen (admin tier) freezes every
 * agent key at once, and unfreezes only with an operator's approval of lifting that very freeze
 * (its freeze epoch); approve_held (admin tier, with
 * an operator's approval of the one action) lets the enclave sign a held action once. The origin's
 * admin key alone can therefore stop agents, never let them spend more.
 */

import { MAX_HELD_APPROVAL_SECONDS } from "../../shared/enclave-ops.ts";
import { heldActionSubject, heldApprovalSubject, nodeFreezeSubject } from "../../shared/operator-approval.ts";
import { freezeShown, heldShown } from "../../shared/passkey-approval.ts";
import { err } from "../../shared/result.ts";
import { isUuid } from "../../shared/uuid.ts";
import { MAX_HELD_APPROVALS, pruneHeldApprovals } from "../agent-policy-checks.ts";
import {
  type AcceptedApproval,
  acceptOperatorCounter,
  checkOperatorApproval,
  operatorRequired,
} from "../operator-approval-check.ts";
import { KEY_NOT_USABLE, refuse, succeed } from "../outcome.ts";
import { p256PublicKey } from "../p256.ts";
import type { OpHandler } from "./handler.ts";

/** Operator keys and passkeys one enclave holds at most, together. */
export const MAX_OPERATOR_KEYS = 64;

const HEX32 = /^0x[0-9a-f]{64}$/;

export const enrollOperatorKey: OpHandler<"enroll_operator_key"> = async (ctx, params) => {
  if (!p256PublicKey(params.public_key)) return refuse("malformed", "not a P-256 public key");
  const { operatorKeys, operatorPasskeys, revokedOperatorKeys } = ctx.state.state;
  if (operatorPasskeys.has(params.key_id) || ctx.state.state.revokedPasskeys.has(params.key_id))
    return refuse("malformed", "this key id is enrolled as a passkey");
  // A revoked key stays out under any id: enrolled anew, its counter would start again at 0.
  if (revokedOperatorKeys.has(params.key_id))
    return refuse("malformed", "this key id names a revoked operator key: it is never enrolled again");
  for (const revoked of revokedOperatorKeys.values()) {
    if (revoked.publicKey === params.public_key)
      return refuse("malformed", "this public key was revoked: it is never enrolled again");
  }
  const existing = operatorKeys.get(params.key_id);
  if (existing) {
    // An id names one key for good: its counter record belongs to that key alone.
    if (existing.publicKey !== params.public_key)
      return refuse("malformed", "this key id is enrolled with another key");
    return succeed({ key_id: params.key_id, public_key: params.public_key });
  }
  if (operatorKeys.size + operatorPasskeys.size >= MAX_OPERATOR_KEYS) {
    return refuse("cap_exceeded", "too many operator keys");
  }
  if (revokedOperatorKeys.size >= MAX_REVOKED_OPERATOR_KEYS) {
    return refuse("cap_exceeded", "too many revoked operator keys");
  }
  await ctx.state.commit((state) => {
    state.operatorKeys.set(params.key_id, {
      publicKey: params.public_key,
      label: params.label ?? null,
      lastCounter: 0,
    });
  });
  ctx.logger.info({ key_id: params.key_id }, "operator key enrolled");
  return succeed({ key_id: params.key_id, public_key: params.public_key });
};

/**
 * Revoked operator keys one enclave remembers; past it, enrolling stops (cap_exceeded), revoking
 * never does. Each was enrolled with the policy key first, so only that key's holder can bring it near.
 */
export const MAX_REVOKED_OPERATOR_KEYS = 256;

/**
 * revoke_operator_key (admin tier: revoking only tightens, as freezing does): a lost or stolen
 * operator key file approves nothing from then on. Its record moves to the revoked ones, so neither
 * its id nor its public key is enrolled again.
 */
export const revokeOperatorKey: OpHandler<"revoke_operator_key"> = async (ctx, params) => {
  const { operatorKeys, revokedOperatorKeys } = ctx.state.state;
  const revoked = revokedOperatorKeys.get(params.key_id);
  if (revoked) return succeed(revokedKeyResult(params.key_id, revoked));
  const key = operatorKeys.get(params.key_id);
  if (!key) return refuse("malformed", "no operator key is enrolled under this key id");
  const record = { publicKey: key.publicKey, revokedAtMs: ctx.now().getTime() };
  // One step: the key is gone from the enrolled ones as it joins the revoked ones, so no approval
  // checked after this line finds it.
  await ctx.state.commit((state) => {
    state.operatorKeys.delete(params.key_id);
    state.revokedOperatorKeys.set(params.key_id, record);
  });
  ctx.logger.info({ key_id: params.key_id }, "operator key revoked");
  return succeed(revokedKeyResult(params.key_id, record));
};

function revokedKeyResult(
  keyId: string,
  revoked: { publicKey: string; revokedAtMs: number },
): { key_id: string; public_key: string; revoked_at_ms: number } {
  return { key_id: keyId, public_key: revoked.publicKey, revoked_at_ms: revoked.revokedAtMs };
}

export const setNodeFrozen: OpHandler<"set_node_frozen"> = async (ctx, params) => {
  const { state } = ctx.state;
  const unfreezing = state.nodeFrozen && !params.frozen;
  if (unfreezing && !params.operator) return err(operatorRequired("node.frozen"));
  if ((params.operator === undefined) !== (params.freeze_epoch === undefined)) {
    return refuse("malformed", "freeze_epoch comes with an operator's approval, and only with one");
  }
  let accepted: AcceptedApproval | null = null;
  // An approval given where none is needed is checked all the same: never silently ignored.
  if (params.operator && params.freeze_epoch !== undefined) {
    const checked = checkOperatorApproval(ctx.config, state, {
      op: "set_node_frozen",
      subject: nodeFreezeSubject(params.frozen, params.freeze_epoch),
      shown: freezeShown(params.frozen, params.freeze_epoch),
      approval: params.operator,
      nowMs: ctx.now().getTime(),
    });
    if (!checked.ok) return checked;
    // After the signature, counter and expiry, so a forged or spent approval is refused as such.
    // Without it, an unfreeze held back (up to its expiry) while another operator lifted the freeze
    // would lift a freeze put on since (an incident's, which needs no operator). The same refusal as
    // a policy change signed over another policy: the node's freeze is its node-wide policy (rule
    // node.frozen), and the remedy is the same, sign again over the one holding now.
    if (params.freeze_epoch !== state.nodeFreezeEpoch) {
      return refuse(
        "capability_rejected",
        "operator approval was signed over another freeze than the one holding now: sign again over this one",
        "operator_policy_changed",
      );
    }
    accepted = checked.value;
  }
  await ctx.state.commit((next) => {
    if (accepted) acceptOperatorCounter(next, accepted);
    // A new freeze, not one put on again over itself: approvals of lifting the last one lapse.
    if (params.frozen && !next.nodeFrozen) next.nodeFreezeEpoch += 1;
    next.nodeFrozen = params.frozen;
  });
  ctx.logger.info(
    {
      frozen: params.frozen,
      freeze_epoch: ctx.state.state.nodeFreezeEpoch,
      operator_key: accepted?.keyId ?? null,
    },
    "node freeze set",
  );
  return succeed({ frozen: params.frozen });
};

export const approveHeld: OpHandler<"approve_held"> = async (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  if (key?.namespace !== "agent-transfer") return KEY_NOT_USABLE;
  const ref = params.ref.toLowerCase();
  if (!(params.kind === "transfer" ? isUuid(ref) : HEX32.test(ref))) {
    return refuse("malformed", "ref is a transfer's action id (uuid) or an authorization's nonce (hex32)");
  }
  const nowMs = ctx.now().getTime();
  const nowSeconds = Math.floor(nowMs / 1000);
  if (params.expires_at <= nowSeconds || params.expires_at > nowSeconds + MAX_HELD_APPROVAL_SECONDS) {
    return refuse("malformed", "expires_at must be in the next 7 days");
  }
  const held = {
    instanceId: ctx.config.instance_id,
    keyRef: key.keyRef,
    kind: params.kind,
    ref,
    to: params.to,
    valueUnits: BigInt(params.value_units),
  };
  const subject = heldActionSubject(held);
  const { state } = ctx.state;
  const checked = checkOperatorApproval(ctx.config, state, {
    op: "approve_held",
    // The operator signed the action and the approval's lifetime both.
    subject: heldApprovalSubject(held, params.expires_at),
    // A passkey signs what the console showed: the payee, the amount and the approval's lifetime.
    shown: heldShown(held, params.expires_at),
    approval: params.operator,
    nowMs,
  });
  if (!checked.ok) return checked;
  pruneHeldApprovals(state, nowMs);
  if (state.heldApprovals.size >= MAX_HELD_APPROVALS && !state.heldApprovals.has(subject)) {
    return refuse("cap_exceeded", "too many approvals pending");
  }
  await ctx.state.commit((next) => {
    acceptOperatorCounter(next, checked.value);
    next.heldApprovals.set(subject, params.expires_at * 1000);
  });
  ctx.logger.info(
    { key_ref: key.keyRef, kind: params.kind, operator_key: checked.value.keyId },
    "held action approved",
  );
  return succeed({ approval: subject });
};
