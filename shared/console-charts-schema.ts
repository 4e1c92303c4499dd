/**
 * GET {base}/admin/agents/overview/charts: the node at a glance (docs/operations.md#the-node-in-charts).
 * Fixed UTC buckets whose bounds are in the answer; counts are integers, money is a string of
 * 6-decimal units, never a float. Runtime-neutral.
 */
import * as z from "zod";

const timestamp = z.string().describe("ISO 8601, UTC");
const count = z.number().int().nonnegative();
const units = z.string().regex(/^\d+$/).describe("6-decimal units, as a decimal string");

/**
 * Why a registration was refused, as the origin counts it (origin/registration/router.ts): the
 * ingress check, a malformed request, a state of the node or a spent quota (its reason), the proof
 * of work, the early local limiter, the persisted admission, or the database unavailable.
 */
export const REGISTRATION_REFUSAL_REASONS = [
  "disabled",
  "ingress",
  "malformed",
  "paused",
  "total_ceiling",
  "key_reserve",
  "network_daily",
  "per_ip_daily",
  "proof_required",
  "proof_spent",
  "early_limiter",
  "admission",
  "unavailable",
] as const;
export type RegistrationRefusalReason = (typeof REGISTRATION_REFUSAL_REASONS)[number];

const window = { from: timestamp, to: timestamp };

const confirmation = z.object({
  /** Confirmed (transfers) or settled (settlements) in the window. */
  count,
  /** Milliseconds from the row's creation to its confirmation; null with nothing confirmed. */
  p50_ms: count.nullable(),
  p99_ms: count.nullable(),
});

export const SERVICE_WALLETS = ["treasury", "settler"] as const;

export const nodeChartsSchema = z.object({
  generated_at: timestamp,
  /** Per UTC hour, the last 24. */
  registrations: z.object({
    ...window,
    buckets: z.array(
      z.object({
        start: timestamp,
        /** Identities issued (the database: every node). */
        issued: count,
        /** Admission attempts that reached the database (every node). */
        admitted_attempts: count,
        /** Refusals by reason, counted by this node since it started (absent reasons are 0). */
        refused: z.partialRecord(z.enum(REGISTRATION_REFUSAL_REASONS), count),
      }),
    ),
    /** The refusals are this process's own counts: per node, lost on restart. */
    refusals_since: timestamp,
  }),
  /** Actions created per UTC minute, the last 60, by kind and their state now. */
  actions: z.object({
    ...window,
    buckets: z.array(
      z.object({
        start: timestamp,
        counts: z.array(z.object({ kind: z.string(), state: z.string(), count })),
      }),
    ),
  }),
  /** Creation to confirmation, for those confirmed in the last hour. */
  time_to_confirmation: z.object({ ...window, transfers: confirmation, settlements: confirmation }),
  /** Verified free keys now, against the registration policy's reserve. */
  key_stock: z.object({ free: count, reserve: count }),
  /** Identity findings recorded in the last 24 hours, by class. */
  findings: z.object({ ...window, by_class: z.array(z.object({ class: z.string(), count })) }),
  /** The service's own wallets, read from the chain now, against their configured floors. */
  balances: z.array(
    z.object({
      wallet: z.enum(SERVICE_WALLETS),
      /** Null when this node has no such wallet (its money switches are off). */
      address: z.string().nullable(),
      balance_units: units.nullable(),
      floor_units: units,
      below_floor: z.boolean().nullable(),
      /** Why the balance is unknown: `not_configured`, `no_chain` or `chain_unavailable`. */
      unknown_reason: z.enum(["not_configured", "no_chain", "chain_unavailable"]).nullable(),
    }),
  ),
});
export type NodeCharts = z.infer<typeof nodeChartsSchema>;
