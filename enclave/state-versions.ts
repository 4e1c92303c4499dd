/**
 * The sealed state's on-disk versions: the current one (v7), and the older ones this enclave still
 * opens, each migrated in memory to the current one (written as it at the next commit). A state is
 * CBOR in wire form: decimal strings for amounts, snake_case names.
 */
import * as z from "zod";
import { storedAgentPolicySchema } from "../shared/agent-policy.ts";
import { decodeCbor } from "../shared/cbor-frame.ts";
import {
  addressSchema,
  CREDENTIAL_ID_PATTERN,
  hex32Schema,
  keyRefSchema,
  MAX_FAUCET_COOLDOWN_MS,
  OPERATOR_KEY_ID_PATTERN,
  operatorNameSchema,
  p256PublicKeySchema,
  policySchema,
  uintStringSchema,
} from "../shared/enclave-ops.ts";
import { SealError } from "./sealing.ts";

const countersSchema = z.record(z.string(), z.number().int().positive());
const dailySchema = z.object({ day: z.string(), spent: z.record(z.string(), uintStringSchema) });
const nonceSchema = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

// v2: policy_version and the policy's fee_ceiling_wei. A v1 state file only exists beside a v1
// sealed config, which the server refuses before reading state. Read only to migrate it.
const persistedV2Schema = z.object({
  v: z.literal(2),
  counters: countersSchema,
  policy: policySchema
    .omit({ x402_validity_margin_seconds: true, x402_daily_limit: true, settler_daily_fee_units: true })
    .nullable(),
  policy_version: z.number().int().nonnegative(),
  treasury: z
    .object({ faucet_key_ref: keyRefSchema, budget_units: uintStringSchema, spent_units: uintStringSchema })
    .nullable(),
  // Optional: state files written before the settler existed stay readable.
  settler_key_ref: keyRefSchema.nullable().optional(),
  daily: dailySchema,
});

// v3: the policy's x402 validity margin and daily count, the treasury's payout terms, the x402
// authorizations per key and day, and the faucet payouts per recipient.
const persistedV3Schema = z.object({
  v: z.literal(3),
  counters: countersSchema,
  policy: policySchema.omit({ settler_daily_fee_units: true }).nullable(),
  policy_version: z.number().int().nonnegative(),
  treasury: z
    .object({
      faucet_key_ref: keyRefSchema,
      budget_units: uintStringSchema,
      spent_units: uintStringSchema,
      terms: z
        .object({
          payout_units: uintStringSchema,
          cooldown_ms: z.number().int().min(0).max(MAX_FAUCET_COOLDOWN_MS),
          daily_limit_units: uintStringSchema,
        })
        .nullable(),
    })
    .nullable(),
  settler_key_ref: keyRefSchema.nullable(),
  daily: dailySchema,
  x402_daily: z.object({ day: z.string(), signed: z.record(z.string(), z.number().int().positive()) }),
  faucet_payouts: z.record(
    addressSchema,
    z.object({
      last_payout_ms: z.number().int().nonnegative(),
      day: z.string(),
      units_today: uintStringSchema,
      // Kept since a payout asked again at its nonce is signed again (ops/sign-transaction.ts).
      nonce: z.number().int().nonnegative().optional(),
    }),
  ),
});
type PersistedV3 = z.infer<typeof persistedV3Schema>;

// v4: the policy's settler fee budget of the day (the settler's fees count in `daily`, under its
// key), and the nonces each key signed a transaction or a filler at (nonce-record.ts).
const persistedV4Schema = persistedV3Schema.extend({
  v: z.literal(4),
  policy: policySchema.nullable(),
  signed_nonces: z.object({
    pruned_at_ms: z.number().int(),
    // Per key [last_signed_ms, floor, signed ranges, filled nonces]: a tuple rather than a map,
    // since the record is written with every group of signatures and names would double its size.
    keys: z.record(
      keyRefSchema,
      z.tuple([
        z.number().int(),
        nonceSchema,
        z.array(z.tuple([nonceSchema, nonceSchema])),
        z.array(nonceSchema),
      ]),
    ),
  }),
});
type PersistedV4 = z.infer<typeof persistedV4Schema>;

const countSchema = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);

// v5: the agent policies per key (document, version, usage of the day and month), the node's
// freeze, the enrolled operator keys with the last counter each signed, and the approvals of held
// actions not yet used (docs/enclave.md#agent-policies-operator-keys-and-approvals). A key without
// a policy has no entry, so a node without agent policies writes what v4 wrote and four empty fields.
const persistedV5Schema = persistedV4Schema.extend({
  v: z.literal(5),
  agent_policies: z.record(
    keyRefSchema,
    z.object({
      // What a release sealed then, which may be more than set_agent_policy takes now (a control
      // character in a resource prefix): a state is read as it was written, or no key signs again.
      policy: storedAgentPolicySchema.nullable(),
      version: countSchema,
      usage: z.object({
        day: z.string(),
        month: z.string(),
        transfers: z.object({
          day_units: uintStringSchema,
          month_units: uintStringSchema,
          day_count: countSchema,
        }),
        x402: z.object({
          day_units: uintStringSchema,
          day_count: countSchema,
          payees: z.record(addressSchema, uintStringSchema),
        }),
      }),
    }),
  ),
  node_frozen: z.boolean(),
  operator_keys: z.record(
    z.string().regex(OPERATOR_KEY_ID_PATTERN),
    z.object({ public_key: p256PublicKeySchema, label: z.string().nullable(), counter: countSchema }),
  ),
  /** Approval subject → when it lapses (ms of the enclave's clock). */
  held_approvals: z.record(hex32Schema, countSchema),
  // Optional: a v5 state written before payee keys existed stays readable (ensurePayeeKey makes one).
  payee_key_ref: keyRefSchema.nullable().optional(),
});
type PersistedV5 = z.infer<typeof persistedV5Schema>;

// v6: the enrolled passkeys (docs/enclave.md#passkeys): the public parts the policy authority
// sealed, the last approval counter each signed and the authenticator's last signCount.
const persistedV6Schema = persistedV5Schema.extend({
  v: z.literal(6),
  operator_passkeys: z.record(
    z.string().regex(OPERATOR_KEY_ID_PATTERN),
    z.object({
      operator: operatorNameSchema,
      credential_id: z.string().regex(CREDENTIAL_ID_PATTERN),
      public_key: p256PublicKeySchema,
      rp_id: z.string(),
      origin: z.string(),
      label: z.string().nullable(),
      counter: countSchema,
      sign_count: z.number().int().nonnegative().max(0xffffffff),
    }),
  ),
});
type PersistedV6 = z.infer<typeof persistedV6Schema>;

// v7: what v6 held, now a full copy that the state journal's records (state-journal.ts) may follow.
// Only the version differs, so that an enclave from before the journal refuses the state instead of
// reading the full copy alone and losing every change written after it.
// The revoked passkeys (docs/enclave.md#passkeys) are a field of their own, optional, and not a mark
// in operator_passkeys: an enclave of an earlier release drops a field it does not know, so it then
// knows a revoked passkey not at all (passkey_unknown) rather than as enrolled. Failing closed needs
// no new version, which would also cost the journal's records after a v7 full copy.
// The revoked operator keys (revoke_operator_key) likewise, moved out of operator_keys.
// The node's freeze epoch (set_node_frozen) is optional too, for the same reason: a state written
// before it reads as epoch 0, which the unfreeze approvals signed after the upgrade name.
export const persistedSchema = persistedV6Schema.extend({
  v: z.literal(7),
  node_freeze_epoch: countSchema.optional(),
  revoked_operator_passkeys: z
    .record(
      z.string().regex(OPERATOR_KEY_ID_PATTERN),
      z.object({
        operator: operatorNameSchema,
        credential_id: z.string().regex(CREDENTIAL_ID_PATTERN),
        revoked_at_ms: countSchema,
      }),
    )
    .optional(),
  revoked_operator_keys: z
    .record(
      z.string().regex(OPERATOR_KEY_ID_PATTERN),
      z.object({ public_key: p256PublicKeySchema, revoked_at_ms: countSchema }),
    )
    .optional(),
});
export type Persisted = z.infer<typeof persistedSchema>;

/**
 * What a v2 policy gets for the fields it did not have: the origin's defaults of
 * AGENT_X402_VALIDITY_MARGIN_SECONDS and AGENT_X402_DAILY_LIMIT, so a node configured by default
 * still starts. Both only narrow what the enclave signed before, when neither was bounded.
 */
export const V2_POLICY_DEFAULTS = { x402_validity_margin_seconds: 6, x402_daily_limit: 1_000 } as const;

/**
 * What a v3 policy gets for the settler's daily fee budget, which it did not have: 20 USDC a day,
 * the local stack's value (docs/enclave.md#the-settlers-fee-budget). It only narrows what the
 * enclave signed before, when the settler's gas was bounded per transaction alone; the operator
 * seals the node's own with `enclave-policy apply --settler-daily`.
 */
export const V3_POLICY_DEFAULTS = { settler_daily_fee_units: "20000000" } as const;

/**
 * A v2 state as v3: the policy with V2_POLICY_DEFAULTS, the treasury without payout terms (it pays
 * nothing until the policy key seals them: no terms can be guessed), no x402 or payout records.
 */
function migrateV2(data: z.infer<typeof persistedV2Schema>): PersistedV3 {
  return {
    v: 3,
    counters: data.counters,
    policy: data.policy ? { ...data.policy, ...V2_POLICY_DEFAULTS } : null,
    policy_version: data.policy_version,
    treasury: data.treasury ? { ...data.treasury, terms: null } : null,
    settler_key_ref: data.settler_key_ref ?? null,
    daily: data.daily,
    x402_daily: { day: "", signed: {} },
    faucet_payouts: {},
  };
}

/**
 * A v3 state as v4: the policy with V3_POLICY_DEFAULTS, and an empty nonce record. The nonces
 * signed before the upgrade are not known, so a filler at one of them is refused.
 */
function migrateV3(data: PersistedV3): PersistedV4 {
  return {
    ...data,
    v: 4,
    policy: data.policy ? { ...data.policy, ...V3_POLICY_DEFAULTS } : null,
    signed_nonces: { pruned_at_ms: 0, keys: {} },
  };
}

/**
 * A v4 state as v5: no agent policies, the node not frozen, no operator keys, no approvals, which is
 * exactly how a v4 enclave signed (it had none of them).
 */
function migrateV4(data: PersistedV4): PersistedV5 {
  return { ...data, v: 5, agent_policies: {}, node_frozen: false, operator_keys: {}, held_approvals: {} };
}

/** A v5 state as v6: no passkeys, which is how a v5 enclave approved (with operator keys only). */
function migrateV5(data: PersistedV5): PersistedV6 {
  return { ...data, v: 6, operator_passkeys: {} };
}

function migrateV6(data: PersistedV6): Persisted {
  return { ...data, v: 7 };
}

/**
 * The state a sealed plaintext holds, from any version this enclave reads, as the current one;
 * `current` is false when it was migrated from an older version.
 */
export function parsePersisted(plaintext: Uint8Array): { persisted: Persisted; current: boolean } {
  const value = decodeCbor(plaintext);
  const current = persistedSchema.safeParse(value);
  if (current.success) return { persisted: current.data, current: true };
  return { persisted: migrateV6(parseOlder(value)), current: false };
}

function parseOlder(value: unknown): PersistedV6 {
  const v6 = persistedV6Schema.safeParse(value);
  if (v6.success) return v6.data;
  const v5 = persistedV5Schema.safeParse(value);
  if (v5.success) return migrateV5(v5.data);
  const v4 = persistedV4Schema.safeParse(value);
  if (v4.success) return migrateV5(migrateV4(v4.data));
  const v3 = persistedV3Schema.safeParse(value);
  if (v3.success) return migrateV5(migrateV4(migrateV3(v3.data)));
  const v2 = persistedV2Schema.safeParse(value);
  if (v2.success) return migrateV5(migrateV4(migrateV3(migrateV2(v2.data))));
  throw new SealError("state does not parse");
}
