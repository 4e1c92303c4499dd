/**
 * Passkey approvals (docs/enclave.md#passkeys): the WebAuthn challenge an enrolled passkey signs
 * to loosen an agent's policy, unfreeze the node or approve one held action. The challenge is the
 * SHA-256 of the canonical CBOR of what the console shows the person (`shown`: the payee and
 * amount, the policy before and after, the unfreezing and the freeze it lifts) together with the enclave instance, the op,
 * the key, a counter and an expiry. The enclave rebuilds `shown` from its own state and the op's
 * params, so a page showing one thing cannot get another approved. The console (through the
 * origin) and the enclave build the same bytes here. Runtime-neutral: no `node:` imports.
 */
import { sha256 } from "@noble/hashes/sha2";
import { type AgentPolicyDocument, policyFromDocument, policyToDocument } from "./agent-policy.ts";
import { type CanonicalValue, encodeCanonicalCbor } from "./canonical-cbor.ts";
import type { HeldAction, OperatorApprovedOp } from "./operator-approval.ts";

/**
 * v2 added `freeze_epoch` to an unfreeze's shown document. The domain is in the challenge, so a v1
 * assertion (an unfreeze naming no freeze) never verifies as v2.
 */
export const PASSKEY_APPROVAL_DOMAIN = "agent-wallet/passkey-approval/v2";

/** What a person approves, as the console shows it and the enclave rebuilds it. */
export type PasskeyShown =
  | {
      op: "approve_held";
      key_ref: string;
      kind: "transfer" | "x402";
      /** The transfer's action id or the authorization's nonce, lowercase. */
      ref: string;
      /** The payee, lowercase. */
      to: string;
      /** The amount in the token's smallest units, a decimal string. */
      value_units: string;
      /** Until when the enclave keeps the approval for the signature (unix seconds). */
      approval_expires_at: number;
    }
  | {
      op: "set_agent_policy";
      key_ref: string;
      /** The policy the enclave holds now (its normal form), or null for none. */
      before: AgentPolicyDocument | null;
      /** The policy the enclave will hold, or null for none. */
      after: AgentPolicyDocument | null;
    }
  | {
      op: "set_node_frozen";
      frozen: boolean;
      /** The node's freeze epoch when shown (get_policy node_freeze_epoch): the freeze it lifts. */
      freeze_epoch: number;
    };

/** The shown document of an approve_held. */
export function heldShown(action: Omit<HeldAction, "instanceId">, approvalExpiresAt: number): PasskeyShown {
  return {
    op: "approve_held",
    key_ref: action.keyRef,
    kind: action.kind,
    ref: action.ref.toLowerCase(),
    to: action.to.toLowerCase(),
    value_units: action.valueUnits.toString(),
    approval_expires_at: approvalExpiresAt,
  };
}

/** The shown document of a set_agent_policy: both documents in their normal form. */
export function policyShown(
  keyRef: string,
  before: AgentPolicyDocument | null,
  after: AgentPolicyDocument | null,
): PasskeyShown {
  const normal = (document: AgentPolicyDocument | null) =>
    document === null ? null : policyToDocument(policyFromDocument(document));
  return { op: "set_agent_policy", key_ref: keyRef, before: normal(before), after: normal(after) };
}

/**
 * The shown document of a set_node_frozen (a passkey signs only the unfreezing: `frozen` false)
 * over the node's freeze epoch now, as nodeFreezeSubject: it lifts that freeze and no later one.
 */
export function freezeShown(frozen: boolean, freezeEpoch: number): PasskeyShown {
  return { op: "set_node_frozen", frozen, freeze_epoch: freezeEpoch };
}

export type PasskeyChallengeInput = {
  envId: string;
  chainId: number;
  /** The enclave instance (get_sealed_identity): an assertion for one instance is void on another. */
  instanceId: string;
  keyId: string;
  counter: number;
  /** Unix seconds; at most MAX_OPERATOR_APPROVAL_SECONDS ahead of the enclave's clock. */
  expiresAt: number;
  shown: PasskeyShown;
};

/** The canonical CBOR the challenge is the hash of (what docs/enclave.md#passkeys lists). */
export function passkeyChallengeMessage(input: PasskeyChallengeInput): Uint8Array {
  const { op, ...shown } = input.shown;
  return encodeCanonicalCbor({
    domain: PASSKEY_APPROVAL_DOMAIN,
    env_id: input.envId,
    chain_id: input.chainId,
    instance_id: input.instanceId,
    op: op satisfies OperatorApprovedOp,
    key_id: input.keyId,
    counter: input.counter,
    expires_at: input.expiresAt,
    shown: shown as unknown as CanonicalValue,
  });
}

/** The WebAuthn challenge: SHA-256 of passkeyChallengeMessage (32 bytes). */
export function passkeyChallenge(input: PasskeyChallengeInput): Uint8Array {
  return sha256(passkeyChallengeMessage(input));
}

const BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/** Unpadded base64url, as clientDataJSON carries the challenge and WebAuthn names credentials. */
export function toBase64Url(bytes: Uint8Array): string {
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const a = bytes[i]!;
    const b = bytes[i + 1];
    const c = bytes[i + 2];
    out += BASE64URL[a >> 2]! + BASE64URL[((a & 3) << 4) | ((b ?? 0) >> 4)]!;
    if (b !== undefined) out += BASE64URL[((b & 15) << 2) | ((c ?? 0) >> 6)]!;
    if (c !== undefined) out += BASE64URL[c & 63]!;
  }
  return out;
}
