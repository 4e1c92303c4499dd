/**
 * Verifying an operator approval (shared/operator-approval.ts) inside the enclave: the key is
 * enrolled, the P-256 signature is over this very op and subject on this instance, a policy change
 * was signed over the policy the enclave holds now, the counter is above the key's last accepted
 * one, and the approval is current by the enclave's own clock. Each
 * failure is `capability_rejected` with its own detail, so the operator knows what to fix; none of
 * them tells anything a signature could be forged from. Pure: the caller records the counter in the
 * same state commit as the op's effect (acceptOperatorCounter), with no await between.
 */
import { verify } from "node:crypto";
import type { WireOperatorApproval } from "../shared/enclave-ops.ts";
import type { EnclaveFailure, OperatorRefusalDetail } from "../shared/enclave-protocol.ts";
import { fromHex, type Hex } from "../shared/hex.ts";
import {
  MAX_OPERATOR_APPROVAL_SECONDS,
  type OperatorApprovedOp,
  operatorApprovalMessage,
} from "../shared/operator-approval.ts";
import type { PasskeyShown } from "../shared/passkey-approval.ts";
import type { EnclaveState } from "./enclave-state.ts";
import { p256PublicKey } from "./p256.ts";
import { checkPasskeyApproval } from "./passkey-approval-check.ts";
import type { SealedConfig } from "./sealed-config.ts";

/** An accepted approval: the key and counter to seal (and a passkey's authenticator signCount). */
export type AcceptedApproval = { keyId: string; counter: number; signCount?: number };

const rejected = (reason: string, detail: OperatorRefusalDetail, rule?: string): EnclaveFailure =>
  rule === undefined
    ? { code: "capability_rejected", reason, detail }
    : { code: "capability_rejected", reason, detail, rule };

/** The refusal of a change that needs an operator and carries none; `rule` is what it loosens. */
export function operatorRequired(rule: string): EnclaveFailure {
  return rejected("this change needs an enrolled operator's approval", "operator_required", rule);
}

/**
 * Checks `approval` for `op`: an operator key's signature over `subject`, or a passkey's assertion
 * over `shown` (passkey-approval-check.ts); the accepted key and counter, or the refusal.
 */
export function checkOperatorApproval(
  config: SealedConfig,
  state: EnclaveState,
  input: {
    op: OperatorApprovedOp;
    subject: Hex;
    /** set_agent_policy: agentPolicySubject of the policy the enclave holds now; else undefined. */
    policyBefore?: Hex;
    shown: PasskeyShown;
    approval: WireOperatorApproval;
    nowMs: number;
  },
): { ok: true; value: AcceptedApproval } | { ok: false; error: EnclaveFailure } {
  const { approval } = input;
  if ("webauthn" in approval) {
    return checkPasskeyApproval(config, state, { shown: input.shown, approval, nowMs: input.nowMs });
  }
  // A passkey's id is no operator key: its private half signs WebAuthn assertions only.
  const key = state.operatorKeys.get(approval.key_id);
  // A policy change's approval names the policy it replaces, and only a policy change's does.
  if ((input.policyBefore === undefined) !== (approval.policy_before === undefined)) {
    const reason =
      "operator approval not valid for this op: a policy change's names the policy it replaces (policy_before), no other's does";
    return { ok: false, error: rejected(reason, "operator_signature") };
  }
  const message = operatorApprovalMessage({
    envId: config.env_id,
    chainId: config.chain_id,
    instanceId: config.instance_id,
    op: input.op,
    subject: input.subject,
    ...(approval.policy_before === undefined ? {} : { policyBefore: approval.policy_before as Hex }),
    keyId: approval.key_id,
    counter: approval.counter,
    expiresAt: approval.expires_at,
  });
  if (!key && state.revokedOperatorKeys.has(approval.key_id)) {
    return {
      ok: false,
      error: rejected(
        `operator key ${approval.key_id} was revoked: it approves nothing`,
        "operator_signature",
      ),
    };
  }
  if (!key || !verifyP256(key.publicKey, message, approval.signature)) {
    return { ok: false, error: rejected("operator approval signature not valid", "operator_signature") };
  }
  // After the signature, as a passkey's `before` is: only the key's holder learns the policy moved.
  // Without it, an approval held back (up to its expiry) would undo a freeze or tightening made since.
  if (input.policyBefore !== undefined && approval.policy_before !== input.policyBefore.toLowerCase()) {
    return {
      ok: false,
      error: rejected(
        "operator approval was signed over another policy than the one held now: sign again over this one",
        "operator_policy_changed",
      ),
    };
  }
  // Checked after the signature, so only the key's holder learns its counter or its clock is off.
  if (approval.counter <= key.lastCounter) {
    return { ok: false, error: rejected("operator approval counter already used", "operator_replay") };
  }
  const nowSeconds = Math.floor(input.nowMs / 1000);
  if (approval.expires_at < nowSeconds || approval.expires_at > nowSeconds + MAX_OPERATOR_APPROVAL_SECONDS) {
    return { ok: false, error: rejected("operator approval expired or too far ahead", "operator_expired") };
  }
  return { ok: true, value: { keyId: approval.key_id, counter: approval.counter } };
}

/** Records an accepted approval's counter (inside the commit that applies the op's effect). */
export function acceptOperatorCounter(state: EnclaveState, accepted: AcceptedApproval): void {
  const key = state.operatorKeys.get(accepted.keyId) ?? state.operatorPasskeys.get(accepted.keyId);
  if (key && accepted.counter > key.lastCounter) key.lastCounter = accepted.counter;
  const passkey = state.operatorPasskeys.get(accepted.keyId);
  if (passkey && accepted.signCount !== undefined && accepted.signCount > passkey.signCount) {
    passkey.signCount = accepted.signCount;
  }
}

function verifyP256(publicKeyHex: string, message: Uint8Array, signature: string): boolean {
  const key = p256PublicKey(publicKeyHex);
  if (!key) return false;
  try {
    return verify("sha256", message, { key, dsaEncoding: "ieee-p1363" }, fromHex(signature));
  } catch {
    return false;
  }
}
