/**
 * The enclave's mutable state in memory: what the state store (state-store.ts) seals and keeps
 * durable. The maps that grow with the keys active in a day are TrackedMaps, so that a write holds
 * only the entries a group of commits touched (state-changes.ts).
 */
import type { AgentPolicyRecord } from "./agent-usage.ts";
import { emptyNonceRecords, type NonceRecords } from "./nonce-record.ts";
import type { Policy, Treasury } from "./policy.ts";
import type { RecipientPayouts } from "./policy-checks.ts";
import { TrackedMap } from "./tracked-map.ts";

export type DailySpend = { day: string; spent: TrackedMap<string, bigint> };
export type DailyCount = { day: string; signed: TrackedMap<string, number> };

export type EnclaveState = {
  /** Last accepted counter per (authority, env, scope, op) key. */
  counters: Map<string, number>;
  policy: Policy | null;
  /** 0 before the first configure_policy; +1 on every accepted one (get_policy reports it). */
  policyVersion: number;
  treasury: Treasury | null;
  /** The x402 settler key (configure_settler), the one key sign_settlement uses. */
  settlerKeyRef: string | null;
  /** The x402 payee key (made at init, configure_payee), the one key that signs offers and receipts. */
  payeeKeyRef: string | null;
  /**
   * Spend per key for one UTC day; a new day starts from zero. An agent key's transfers and
   * fillers count against the policy's daily limit, the settler key's fees against its fee budget.
   */
  daily: DailySpend;
  /** x402 authorizations signed per key for one UTC day; a new day starts from zero. */
  x402Daily: DailyCount;
  /**
   * Faucet payouts per recipient (lowercase address), kept while they still bound a payout (the
   * day's units, or the cooldown); only agent keys of this enclave are ever paid, so it is bounded.
   */
  faucetPayouts: TrackedMap<string, RecipientPayouts>;
  /** The nonces each key signed a transaction and a filler at (nonce-record.ts). */
  nonces: NonceRecords;
  /** Agent keys' spending policies and their usage (agent-usage.ts); only keys that had one. */
  agentPolicies: TrackedMap<string, AgentPolicyRecord>;
  /** Every agent key of the node is frozen (set_node_frozen). */
  nodeFrozen: boolean;
  /**
   * +1 each time the node is frozen from not frozen: names the freeze an unfreeze's approval lifts,
   * so one held back cannot lift a freeze put on after it was signed. 0 before the first freeze.
   */
  nodeFreezeEpoch: number;
  /** Enrolled operator keys by id (enroll_operator_key). */
  operatorKeys: Map<string, OperatorKeyRecord>;
  /** Enrolled passkeys by key id (enroll_operator_passkey); key ids are shared with operatorKeys. */
  operatorPasskeys: Map<string, OperatorPasskeyRecord>;
  /**
   * Revoked passkeys by key id (revoke_operator_passkey), moved out of operatorPasskeys: neither
   * the id nor the credential approves or is enrolled again.
   */
  revokedPasskeys: Map<string, RevokedPasskeyRecord>;
  /**
   * Revoked operator keys by key id (revoke_operator_key), moved out of operatorKeys: neither the id
   * nor the public key approves or is enrolled again.
   */
  revokedOperatorKeys: Map<string, RevokedOperatorKeyRecord>;
  /** Approved held actions not yet signed: subject (heldActionSubject) → when it lapses, in ms. */
  heldApprovals: Map<string, number>;
};

export type OperatorKeyRecord = {
  /** 0x04 ‖ X ‖ Y, P-256. */
  publicKey: string;
  label: string | null;
  /** The last counter of an approval accepted from this key (0: none yet); the next must exceed it. */
  lastCounter: number;
};

export type OperatorPasskeyRecord = {
  /** The operator's name, as the audit shows who approved. */
  operator: string;
  /** The WebAuthn credential id, unpadded base64url. */
  credentialId: string;
  /** 0x04 ‖ X ‖ Y, P-256. */
  publicKey: string;
  rpId: string;
  origin: string;
  label: string | null;
  /** The last counter of an approval accepted from this passkey (0: none yet). */
  lastCounter: number;
  /** The authenticator's last signCount seen (0: it does not count, or none seen yet). */
  signCount: number;
};

export type RevokedOperatorKeyRecord = {
  /** 0x04 ‖ X ‖ Y, P-256. */
  publicKey: string;
  /** When it was revoked, in ms of the enclave's clock. */
  revokedAtMs: number;
};

export type RevokedPasskeyRecord = {
  operator: string;
  credentialId: string;
  /** When it was revoked, in ms of the enclave's clock. */
  revokedAtMs: number;
};

export function emptyState(): EnclaveState {
  return {
    counters: new Map(),
    policy: null,
    policyVersion: 0,
    treasury: null,
    settlerKeyRef: null,
    payeeKeyRef: null,
    daily: { day: "", spent: new TrackedMap() },
    x402Daily: { day: "", signed: new TrackedMap() },
    faucetPayouts: new TrackedMap(),
    nonces: emptyNonceRecords(),
    agentPolicies: new TrackedMap(),
    nodeFrozen: false,
    nodeFreezeEpoch: 0,
    operatorKeys: new Map(),
    operatorPasskeys: new Map(),
    revokedPasskeys: new Map(),
    revokedOperatorKeys: new Map(),
    heldApprovals: new Map(),
  };
}
