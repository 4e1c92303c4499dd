/**
 * The enclave's mutable state (capability counters, policy and its version, treasury, daily spend
 * per key, x402 authorizations per key and day, faucet payouts per recipient, the nonces each key
 * signed at), sealed in its two slot files (state-slots.ts); its on-disk versions are in
 * state-versions.ts. Writes use group commit: a change is applied to memory at once (so
 * checks that follow see it, with no await in between), and its caller waits until a write that
 * includes it is durable. Concurrent signers therefore share one fdatasync instead of queueing one
 * each, and no signature leaves the enclave before the spend it counts is on disk.
 */
import { policyFromDocument } from "../shared/agent-policy.ts";
import { encodeCbor } from "../shared/cbor-frame.ts";
import type { AgentPolicyRecord } from "./agent-usage.ts";
import { emptyNonceRecords, type NonceRecords } from "./nonce-record.ts";
import { type Policy, policyFromWire, policyToWire, type Treasury } from "./policy.ts";
import type { RecipientPayouts } from "./policy-checks.ts";
import { SealError } from "./sealing.ts";
import { type StateSlotPaths, StateSlots } from "./state-slots.ts";
import { type Persisted, parsePersisted } from "./state-versions.ts";

export type DailySpend = { day: string; spent: Map<string, bigint> };
export type DailyCount = { day: string; signed: Map<string, number> };

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
  faucetPayouts: Map<string, RecipientPayouts>;
  /** The nonces each key signed a transaction and a filler at (nonce-record.ts). */
  nonces: NonceRecords;
  /** Agent keys' spending policies and their usage (agent-usage.ts); only keys that had one. */
  agentPolicies: Map<string, AgentPolicyRecord>;
  /** Every agent key of the node is frozen (set_node_frozen). */
  nodeFrozen: boolean;
  /** Enrolled operator keys by id (enroll_operator_key). */
  operatorKeys: Map<string, OperatorKeyRecord>;
  /** Enrolled passkeys by key id (enroll_operator_passkey); key ids are shared with operatorKeys. */
  operatorPasskeys: Map<string, OperatorPasskeyRecord>;
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

type Waiter = { resolve: () => void; reject: (error: Error) => void };

export class StateStore {
  private pending: Waiter[] = [];
  private flushing: Promise<void> | null = null;

  private constructor(
    private readonly slots: StateSlots,
    readonly state: EnclaveState,
  ) {}

  /** Loads the sealed state, or starts empty when none was written yet. */
  static async open(paths: StateSlotPaths, sealingKey: Uint8Array): Promise<StateStore> {
    const { slots, plaintext } = await StateSlots.open(paths, sealingKey);
    if (plaintext === null) return new StateStore(slots, emptyState());
    // An older version is migrated in memory and written as the current one at the next commit.
    return new StateStore(slots, fromPersisted(parsePersisted(plaintext)));
  }

  /**
   * Applies `change` to the in-memory state now and resolves once it is durable. On a failed
   * write the change stays applied in memory: counters and spends only ever err towards refusing.
   */
  commit(change: (state: EnclaveState) => void): Promise<void> {
    change(this.state);
    return new Promise<void>((resolve, reject) => {
      this.pending.push({ resolve, reject });
      // The write starts after this turn of the event loop, so every request read from the
      // socket in it (a batch of signatures) shares that write, not just the first of them.
      if (!this.flushing)
        this.flushing = new Promise((next) => setImmediate(next)).then(() => this.flushLoop());
    });
  }

  /** Waits for the writes in progress, then closes the files (for shutdown: no commit may follow). */
  async close(): Promise<void> {
    while (this.flushing) await this.flushing;
    await this.slots.close();
  }

  private async flushLoop(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending;
      this.pending = [];
      try {
        // Snapshot and waiters are taken together, synchronously: every change in the snapshot
        // belongs to a waiter of this batch or of an earlier one.
        await this.slots.write(encodeCbor(toPersisted(this.state)));
        for (const waiter of batch) waiter.resolve();
      } catch (cause) {
        const error = new SealError("state write failed", { cause });
        for (const waiter of batch) waiter.reject(error);
      }
    }
    this.flushing = null;
  }
}

function emptyState(): EnclaveState {
  return {
    counters: new Map(),
    policy: null,
    policyVersion: 0,
    treasury: null,
    settlerKeyRef: null,
    payeeKeyRef: null,
    daily: { day: "", spent: new Map() },
    x402Daily: { day: "", signed: new Map() },
    faucetPayouts: new Map(),
    nonces: emptyNonceRecords(),
    agentPolicies: new Map(),
    nodeFrozen: false,
    operatorKeys: new Map(),
    operatorPasskeys: new Map(),
    heldApprovals: new Map(),
  };
}

function fromPersisted(data: Persisted): EnclaveState {
  const { treasury } = data;
  return {
    counters: new Map(Object.entries(data.counters)),
    policy: data.policy ? policyFromWire(data.policy) : null,
    policyVersion: data.policy_version,
    treasury: treasury
      ? {
          faucetKeyRef: treasury.faucet_key_ref,
          budgetUnits: BigInt(treasury.budget_units),
          spentUnits: BigInt(treasury.spent_units),
          terms: treasury.terms
            ? {
                payoutUnits: BigInt(treasury.terms.payout_units),
                cooldownMs: treasury.terms.cooldown_ms,
                dailyLimitUnits: BigInt(treasury.terms.daily_limit_units),
              }
            : null,
        }
      : null,
    settlerKeyRef: data.settler_key_ref,
    payeeKeyRef: data.payee_key_ref ?? null,
    daily: {
      day: data.daily.day,
      spent: new Map(Object.entries(data.daily.spent).map(([key, units]) => [key, BigInt(units)])),
    },
    x402Daily: { day: data.x402_daily.day, signed: new Map(Object.entries(data.x402_daily.signed)) },
    faucetPayouts: new Map(
      Object.entries(data.faucet_payouts).map(([address, paid]) => [
        address.toLowerCase(),
        { lastPayoutMs: paid.last_payout_ms, day: paid.day, unitsToday: BigInt(paid.units_today) },
      ]),
    ),
    nonces: {
      prunedAtMs: data.signed_nonces.pruned_at_ms,
      keys: new Map(
        Object.entries(data.signed_nonces.keys).map(([keyRef, [lastSignedMs, floor, signed, filled]]) => [
          keyRef,
          {
            lastSignedMs,
            floor,
            signed: signed.map(([first, last]): [number, number] => [first, last]),
            filled,
          },
        ]),
      ),
    },
    agentPolicies: new Map(
      Object.entries(data.agent_policies).map(([keyRef, record]): [string, AgentPolicyRecord] => [
        keyRef,
        {
          document: record.policy,
          policy: record.policy ? policyFromDocument(record.policy) : null,
          version: record.version,
          usage: {
            day: record.usage.day,
            month: record.usage.month,
            transfers: {
              dayUnits: BigInt(record.usage.transfers.day_units),
              monthUnits: BigInt(record.usage.transfers.month_units),
              dayCount: record.usage.transfers.day_count,
            },
            x402: {
              dayUnits: BigInt(record.usage.x402.day_units),
              dayCount: record.usage.x402.day_count,
              payeeDayUnits: new Map(
                Object.entries(record.usage.x402.payees).map(([payee, units]) => [
                  payee.toLowerCase(),
                  BigInt(units),
                ]),
              ),
            },
          },
        },
      ]),
    ),
    nodeFrozen: data.node_frozen,
    operatorKeys: new Map(
      Object.entries(data.operator_keys).map(([keyId, key]) => [
        keyId,
        { publicKey: key.public_key, label: key.label, lastCounter: key.counter },
      ]),
    ),
    operatorPasskeys: new Map(
      Object.entries(data.operator_passkeys).map(([keyId, passkey]) => [
        keyId,
        {
          operator: passkey.operator,
          credentialId: passkey.credential_id,
          publicKey: passkey.public_key,
          rpId: passkey.rp_id,
          origin: passkey.origin,
          label: passkey.label,
          lastCounter: passkey.counter,
          signCount: passkey.sign_count,
        },
      ]),
    ),
    heldApprovals: new Map(Object.entries(data.held_approvals)),
  };
}

function toPersisted(state: EnclaveState): Persisted {
  const { treasury } = state;
  return {
    v: 6,
    counters: Object.fromEntries(state.counters),
    policy: state.policy ? policyToWire(state.policy) : null,
    policy_version: state.policyVersion,
    treasury: treasury
      ? {
          faucet_key_ref: treasury.faucetKeyRef,
          budget_units: treasury.budgetUnits.toString(),
          spent_units: treasury.spentUnits.toString(),
          terms: treasury.terms
            ? {
                payout_units: treasury.terms.payoutUnits.toString(),
                cooldown_ms: treasury.terms.cooldownMs,
                daily_limit_units: treasury.terms.dailyLimitUnits.toString(),
              }
            : null,
        }
      : null,
    settler_key_ref: state.settlerKeyRef,
    payee_key_ref: state.payeeKeyRef,
    daily: {
      day: state.daily.day,
      spent: Object.fromEntries([...state.daily.spent].map(([key, units]) => [key, units.toString()])),
    },
    x402_daily: { day: state.x402Daily.day, signed: Object.fromEntries(state.x402Daily.signed) },
    faucet_payouts: Object.fromEntries(
      [...state.faucetPayouts].map(([address, paid]) => [
        address,
        { last_payout_ms: paid.lastPayoutMs, day: paid.day, units_today: paid.unitsToday.toString() },
      ]),
    ),
    signed_nonces: {
      pruned_at_ms: state.nonces.prunedAtMs,
      keys: Object.fromEntries(
        [...state.nonces.keys].map(([keyRef, record]) => [
          keyRef,
          [record.lastSignedMs, record.floor, record.signed, record.filled],
        ]),
      ),
    },
    agent_policies: Object.fromEntries(
      [...state.agentPolicies].map(([keyRef, record]) => [
        keyRef,
        {
          policy: record.document,
          version: record.version,
          usage: {
            day: record.usage.day,
            month: record.usage.month,
            transfers: {
              day_units: record.usage.transfers.dayUnits.toString(),
              month_units: record.usage.transfers.monthUnits.toString(),
              day_count: record.usage.transfers.dayCount,
            },
            x402: {
              day_units: record.usage.x402.dayUnits.toString(),
              day_count: record.usage.x402.dayCount,
              payees: Object.fromEntries(
                [...record.usage.x402.payeeDayUnits].map(([payee, units]) => [payee, units.toString()]),
              ),
            },
          },
        },
      ]),
    ),
    node_frozen: state.nodeFrozen,
    operator_keys: Object.fromEntries(
      [...state.operatorKeys].map(([keyId, key]) => [
        keyId,
        { public_key: key.publicKey, label: key.label, counter: key.lastCounter },
      ]),
    ),
    operator_passkeys: Object.fromEntries(
      [...state.operatorPasskeys].map(([keyId, passkey]) => [
        keyId,
        {
          operator: passkey.operator,
          credential_id: passkey.credentialId,
          public_key: passkey.publicKey,
          rp_id: passkey.rpId,
          origin: passkey.origin,
          label: passkey.label,
          counter: passkey.lastCounter,
          sign_count: passkey.signCount,
        },
      ]),
    ),
    held_approvals: Object.fromEntries(state.heldApprovals),
  };
}
