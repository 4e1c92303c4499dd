/**
 * The enclave's mutable state (capability counters, policy and its version, treasury, daily spend
 * per key), sealed in its two slot files (state-slots.ts). Writes use group commit: a change is
 * applied to memory at once (so checks that follow see it, with no await in between), and its
 * caller waits until a write that includes it is durable. Concurrent signers therefore share one
 * fdatasync instead of queueing one each, and no signature leaves the enclave before the spend it
 * counts is on disk.
 */
import { z } from "zod";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import { keyRefSchema, policySchema, uintStringSchema } from "../shared/enclave-ops.ts";
import { type Policy, policyFromWire, policyToWire, type Treasury } from "./policy.ts";
import { SealError } from "./sealing.ts";
import { type StateSlotPaths, StateSlots } from "./state-slots.ts";

export type DailySpend = { day: string; spent: Map<string, bigint> };

export type EnclaveState = {
  /** Last accepted counter per (authority, env, scope, op) key. */
  counters: Map<string, number>;
  policy: Policy | null;
  /** 0 before the first configure_policy; +1 on every accepted one (get_policy reports it). */
  policyVersion: number;
  treasury: Treasury | null;
  /** The x402 settler key (configure_settler), the one key sign_settlement uses. */
  settlerKeyRef: string | null;
  /** Transfer spend per key for one UTC day; a new day starts from zero. */
  daily: DailySpend;
};

// v2 (issue 11): policy_version, and the policy's fee_ceiling_wei. A v1 state file only exists
// beside a v1 sealed config, which the server refuses before reading state.
const persistedSchema = z.object({
  v: z.literal(2),
  counters: z.record(z.string(), z.number().int().positive()),
  policy: policySchema.nullable(),
  policy_version: z.number().int().nonnegative(),
  treasury: z
    .object({ faucet_key_ref: keyRefSchema, budget_units: uintStringSchema, spent_units: uintStringSchema })
    .nullable(),
  // Optional: state files written before the settler existed stay readable.
  settler_key_ref: keyRefSchema.nullable().optional(),
  daily: z.object({ day: z.string(), spent: z.record(z.string(), uintStringSchema) }),
});

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
    const parsed = persistedSchema.safeParse(decodeCbor(plaintext));
    if (!parsed.success) throw new SealError("state does not parse");
    return new StateStore(slots, fromPersisted(parsed.data));
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
    daily: { day: "", spent: new Map() },
  };
}

function fromPersisted(data: z.infer<typeof persistedSchema>): EnclaveState {
  return {
    counters: new Map(Object.entries(data.counters)),
    policy: data.policy ? policyFromWire(data.policy) : null,
    policyVersion: data.policy_version,
    treasury: data.treasury
      ? {
          faucetKeyRef: data.treasury.faucet_key_ref,
          budgetUnits: BigInt(data.treasury.budget_units),
          spentUnits: BigInt(data.treasury.spent_units),
        }
      : null,
    settlerKeyRef: data.settler_key_ref ?? null,
    daily: {
      day: data.daily.day,
      spent: new Map(Object.entries(data.daily.spent).map(([key, units]) => [key, BigInt(units)])),
    },
  };
}

function toPersisted(state: EnclaveState): z.infer<typeof persistedSchema> {
  return {
    v: 2,
    counters: Object.fromEntries(state.counters),
    policy: state.policy ? policyToWire(state.policy) : null,
    policy_version: state.policyVersion,
    treasury: state.treasury
      ? {
          faucet_key_ref: state.treasury.faucetKeyRef,
          budget_units: state.treasury.budgetUnits.toString(),
          spent_units: state.treasury.spentUnits.toString(),
        }
      : null,
    settler_key_ref: state.settlerKeyRef,
    daily: {
      day: state.daily.day,
      spent: Object.fromEntries([...state.daily.spent].map(([key, units]) => [key, units.toString()])),
    },
  };
}
