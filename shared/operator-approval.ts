/**
 * Operator approvals (docs/enclave.md#agent-policies-operator-keys-and-approvals): what a person
 * holding an enrolled P-256 operator key signs to loosen an agent's policy, unfreeze the node or
 * approve one held action, and the subjects (hashes) that name each of those exact changes. The
 * message names the enclave instance, the op, the subject, the key, a counter and an expiry, so a
 * signature can be neither moved to another change or enclave, nor replayed, nor kept for later;
 * a policy change names the policy it replaces too, so an approval held back while the agent froze
 * or tightened its policy does not undo that (as a passkey's `before`, shared/passkey-approval.ts),
 * and an unfreeze names the freeze it lifts (its freeze epoch), so one held back does not lift a
 * freeze put on after it was signed.
 * The enclave verifies (node:crypto), the operator's tool signs (ops/lib/operator-key.ts); this
 * module only builds the bytes both agree on. Runtime-neutral: no `node:` imports.
 */
import { sha256 } from "@noble/hashes/sha2";
import { type AgentPolicyDocument, policyFromDocument, policyToDocument } from "./agent-policy.ts";
import { encodeCanonicalCbor } from "./canonical-cbor.ts";
import type { WireOperatorApproval } from "./enclave-ops.ts";
import { type Hex, toHex } from "./hex.ts";

/**
 * v2 added `policy_before`; v3 the freeze epoch in an unfreeze's subject (nodeFreezeSubject). The
 * domain is in the signed bytes, so an older signature (a policy change naming only the policy
 * after, an unfreeze naming no freeze) never verifies as v3: it cannot be replayed over a tightened
 * policy or a freeze put on since.
 */
export const OPERATOR_APPROVAL_DOMAIN = "agent-wallet/operator-approval/v3";
/** An approval expires at most this far ahead of the enclave's clock (it is signed to be used now). */
export const MAX_OPERATOR_APPROVAL_SECONDS = 3600;

/**
 * An operator key's approval in memory (camelCase; the wire is snake_case, enclave-ops.ts).
 * `policyBefore`: a set_agent_policy's only, as signed (OperatorApprovalMessageInput).
 */
export type KeyApproval = {
  keyId: string;
  counter: number;
  expiresAt: number;
  signature: Hex;
  policyBefore?: Hex;
};
/** A passkey's approval in memory: the WebAuthn assertion's parts as the authenticator made them. */
export type PasskeyApproval = {
  keyId: string;
  counter: number;
  expiresAt: number;
  webauthn: { authenticatorData: Hex; clientDataJson: Hex; signature: Hex };
};
/** An approval by an operator key or by a passkey (docs/enclave.md#passkeys). */
export type OperatorApproval = KeyApproval | PasskeyApproval;

export function operatorApprovalToWire(approval: OperatorApproval): WireOperatorApproval {
  const head = { key_id: approval.keyId, counter: approval.counter, expires_at: approval.expiresAt };
  if ("webauthn" in approval) {
    return {
      ...head,
      webauthn: {
        authenticator_data: approval.webauthn.authenticatorData.toLowerCase(),
        client_data_json: approval.webauthn.clientDataJson.toLowerCase(),
        signature: approval.webauthn.signature.toLowerCase(),
      },
    };
  }
  return {
    ...head,
    signature: approval.signature.toLowerCase(),
    ...(approval.policyBefore === undefined ? {} : { policy_before: approval.policyBefore.toLowerCase() }),
  };
}

export function operatorApprovalFromWire(wire: WireOperatorApproval): OperatorApproval {
  const head = { keyId: wire.key_id, counter: wire.counter, expiresAt: wire.expires_at };
  if ("webauthn" in wire) {
    return {
      ...head,
      webauthn: {
        authenticatorData: wire.webauthn.authenticator_data as Hex,
        clientDataJson: wire.webauthn.client_data_json as Hex,
        signature: wire.webauthn.signature as Hex,
      },
    };
  }
  return {
    ...head,
    signature: wire.signature as Hex,
    ...(wire.policy_before === undefined ? {} : { policyBefore: wire.policy_before as Hex }),
  };
}

/** The ops an operator approval can be for. */
export type OperatorApprovedOp = "set_agent_policy" | "set_node_frozen" | "approve_held";

export type OperatorApprovalMessageInput = {
  envId: string;
  chainId: number;
  /** The enclave instance (get_sealed_identity): a signature for one instance is void on another. */
  instanceId: string;
  op: OperatorApprovedOp;
  /** The change approved: agentPolicySubject, heldActionSubject or nodeFreezeSubject. */
  subject: Hex;
  /**
   * set_agent_policy only, and there always: agentPolicySubject of the policy the change replaces
   * (the one the enclave holds when the operator signs). The enclave takes the approval only over
   * that very policy.
   */
  policyBefore?: Hex;
  keyId: string;
  counter: number;
  /** Unix seconds. */
  expiresAt: number;
};

/** The bytes an operator key signs (ECDSA P-256 over SHA-256 of them): canonical CBOR of the map. */
export function operatorApprovalMessage(input: OperatorApprovalMessageInput): Uint8Array {
  return encodeCanonicalCbor({
    domain: OPERATOR_APPROVAL_DOMAIN,
    env_id: input.envId,
    chain_id: input.chainId,
    instance_id: input.instanceId,
    op: input.op,
    subject: input.subject.toLowerCase(),
    policy_before: input.policyBefore?.toLowerCase() ?? null,
    key_id: input.keyId,
    counter: input.counter,
    expires_at: input.expiresAt,
  });
}

const digest = (value: unknown): Hex => toHex(sha256(encodeCanonicalCbor(value)));

/**
 * The subject of a set_agent_policy: the key and the policy as the enclave will hold it (the
 * document normalised: lowercase addresses, only what it sets), or null for none. Two documents
 * meaning the same policy have one subject. Of the policy the enclave holds now, it is the
 * approval's `policyBefore`.
 */
export function agentPolicySubject(keyRef: string, policy: AgentPolicyDocument | null): Hex {
  return digest({
    op: "set_agent_policy",
    key_ref: keyRef,
    policy: policy === null ? null : policyToDocument(policyFromDocument(policy)),
  });
}

/** A held action: a transfer by its action id, or an x402 authorization by its nonce. */
export type HeldAction = {
  instanceId: string;
  keyRef: string;
  kind: "transfer" | "x402";
  /** The transfer's action id (uuid), or the authorization's nonce (0x-hex32). */
  ref: string;
  /** The recipient (transfer) or payTo (x402); compared lowercase. */
  to: string;
  valueUnits: bigint;
};

/**
 * The subject of an approve_held, and the hash the enclave keeps the approval under: the one
 * action on this instance, by its id, recipient and value, so an approval moved to another action
 * (another id, recipient or amount) approves nothing.
 */
export function heldActionSubject(action: HeldAction): Hex {
  return digest({
    op: "approve_held",
    instance_id: action.instanceId,
    key_ref: action.keyRef,
    kind: action.kind,
    ref: action.ref.toLowerCase(),
    to: action.to.toLowerCase(),
    value_units: action.valueUnits.toString(),
  });
}

/**
 * What an operator signs to approve a held action: the action (heldActionSubject, the key the
 * enclave keeps the approval under) and until when the approval may be used, so nobody relaying
 * it can make it last longer than the operator chose.
 */
export function heldApprovalSubject(action: HeldAction, approvalExpiresAt: number): Hex {
  return digest({ op: "approve_held", held: heldActionSubject(action), expires_at: approvalExpiresAt });
}

/**
 * The subject of a set_node_frozen (an operator signs only the unfreezing: `frozen` false) over
 * `freezeEpoch`, the node's freeze epoch when the operator signs (get_policy node_freeze_epoch: it
 * grows each time the node is frozen). The enclave takes it only while that very freeze holds, so
 * an unfreeze held back while another operator lifted the freeze cannot lift a later one.
 */
export function nodeFreezeSubject(frozen: boolean, freezeEpoch: number): Hex {
  return digest({ op: "set_node_frozen", frozen, freeze_epoch: freezeEpoch });
}
