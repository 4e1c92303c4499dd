/**
 * The enclave's state (enclave-state.ts) in its sealed wire form (state-versions.ts): decimal strings
 * for amounts, snake_case names. The maps that grow with the keys active in a day are listed in
 * KEYED_MAPS, so that the state journal (state-changes.ts) can write their entries one at a time.
 */
import { policyFromDocument } from "../shared/agent-policy.ts";
import type { AgentPolicyRecord } from "./agent-usage.ts";
import type { EnclaveState } from "./enclave-state.ts";
import type { KeyNonces } from "./nonce-record.ts";
import { policyFromWire, policyToWire } from "./policy.ts";
import type { RecipientPayouts } from "./policy-checks.ts";
import type { Persisted } from "./state-versions.ts";
import { TrackedMap } from "./tracked-map.ts";

export const KEYED_MAP_NAMES = [
  "daily_spent",
  "x402_signed",
  "faucet_payouts",
  "signed_nonces",
  "agent_policies",
] as const;
export type KeyedMapName = (typeof KEYED_MAP_NAMES)[number];

/** One map of the state whose entries are written one at a time, in memory and on the wire. */
export type KeyedMap = {
  name: KeyedMapName;
  live: (state: EnclaveState) => TrackedMap<string, unknown>;
  wire: (persisted: Persisted) => Record<string, unknown>;
  toWire: (value: unknown) => unknown;
};

function keyedMap<V, W>(
  name: KeyedMapName,
  live: (state: EnclaveState) => TrackedMap<string, V>,
  wire: (persisted: Persisted) => Record<string, W>,
  toWire: (value: V) => W,
): KeyedMap {
  return { name, live, wire, toWire } as unknown as KeyedMap;
}

export const KEYED_MAPS: readonly KeyedMap[] = [
  keyedMap(
    "daily_spent",
    (state) => state.daily.spent,
    (persisted) => persisted.daily.spent,
    (units: bigint) => units.toString(),
  ),
  keyedMap(
    "x402_signed",
    (state) => state.x402Daily.signed,
    (persisted) => persisted.x402_daily.signed,
    (count: number) => count,
  ),
  keyedMap(
    "faucet_payouts",
    (state) => state.faucetPayouts,
    (persisted) => persisted.faucet_payouts,
    payoutToWire,
  ),
  keyedMap(
    "signed_nonces",
    (state) => state.nonces.keys,
    (persisted) => persisted.signed_nonces.keys,
    noncesToWire,
  ),
  keyedMap(
    "agent_policies",
    (state) => state.agentPolicies,
    (persisted) => persisted.agent_policies,
    agentPolicyToWire,
  ),
];

/** The whole state in wire form. */
export function toPersisted(state: EnclaveState): Persisted {
  const persisted = restToWire(state);
  for (const map of KEYED_MAPS) {
    const entries = map.wire(persisted);
    for (const [key, value] of map.live(state)) entries[key] = map.toWire(value);
  }
  return persisted;
}

/** The state in wire form with every keyed map empty: what a journal record writes whole when it changed. */
export function restToWire(state: EnclaveState): Persisted {
  const { treasury } = state;
  return {
    v: 7,
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
    daily: { day: state.daily.day, spent: {} },
    x402_daily: { day: state.x402Daily.day, signed: {} },
    faucet_payouts: {},
    signed_nonces: { pruned_at_ms: state.nonces.prunedAtMs, keys: {} },
    agent_policies: {},
    node_frozen: state.nodeFrozen,
    node_freeze_epoch: state.nodeFreezeEpoch,
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
    revoked_operator_passkeys: Object.fromEntries(
      [...state.revokedPasskeys].map(([keyId, revoked]) => [
        keyId,
        {
          operator: revoked.operator,
          credential_id: revoked.credentialId,
          revoked_at_ms: revoked.revokedAtMs,
        },
      ]),
    ),
    revoked_operator_keys: Object.fromEntries(
      [...state.revokedOperatorKeys].map(([keyId, revoked]) => [
        keyId,
        { public_key: revoked.publicKey, revoked_at_ms: revoked.revokedAtMs },
      ]),
    ),
    held_approvals: Object.fromEntries(state.heldApprovals),
  };
}

type PayoutWire = Persisted["faucet_payouts"][string];
type NoncesWire = Persisted["signed_nonces"]["keys"][string];
type AgentPolicyWire = Persisted["agent_policies"][string];

function payoutToWire(paid: RecipientPayouts): PayoutWire {
  return {
    last_payout_ms: paid.lastPayoutMs,
    day: paid.day,
    units_today: paid.unitsToday.toString(),
    ...(paid.nonce === undefined ? {} : { nonce: paid.nonce }),
  };
}

function noncesToWire(record: KeyNonces): NoncesWire {
  return [record.lastSignedMs, record.floor, record.signed, record.filled];
}

function agentPolicyToWire(record: AgentPolicyRecord): AgentPolicyWire {
  return {
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
  };
}

/** The state a parsed wire form holds. */
export function fromPersisted(data: Persisted): EnclaveState {
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
      spent: TrackedMap.of(Object.entries(data.daily.spent).map(([key, units]) => [key, BigInt(units)])),
    },
    x402Daily: { day: data.x402_daily.day, signed: TrackedMap.of(Object.entries(data.x402_daily.signed)) },
    faucetPayouts: TrackedMap.of(
      Object.entries(data.faucet_payouts).map(([address, paid]) => [
        address.toLowerCase(),
        {
          lastPayoutMs: paid.last_payout_ms,
          day: paid.day,
          unitsToday: BigInt(paid.units_today),
          ...(paid.nonce === undefined ? {} : { nonce: paid.nonce }),
        },
      ]),
    ),
    nonces: {
      prunedAtMs: data.signed_nonces.pruned_at_ms,
      keys: TrackedMap.of(
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
    agentPolicies: TrackedMap.of(
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
    // A state of an earlier release has none: its freeze, if any, is epoch 0.
    nodeFreezeEpoch: data.node_freeze_epoch ?? 0,
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
    revokedPasskeys: new Map(
      Object.entries(data.revoked_operator_passkeys ?? {}).map(([keyId, revoked]) => [
        keyId,
        {
          operator: revoked.operator,
          credentialId: revoked.credential_id,
          revokedAtMs: revoked.revoked_at_ms,
        },
      ]),
    ),
    revokedOperatorKeys: new Map(
      Object.entries(data.revoked_operator_keys ?? {}).map(([keyId, revoked]) => [
        keyId,
        { publicKey: revoked.public_key, revokedAtMs: revoked.revoked_at_ms },
      ]),
    ),
    heldApprovals: new Map(Object.entries(data.held_approvals)),
  };
}
