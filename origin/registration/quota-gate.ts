import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../db/client.ts";
import type { RegistrationPolicy } from "./policy-repository.ts";

/** The policy and every count the issuance quotas are judged on, read in one statement. */
export type RegistrationState = Omit<RegistrationPolicy, "updatedAt"> & {
  /**
   * Public registrations ever issued (the total ceiling counts these), counted only up to the
   * ceiling: the decision compares it against the ceiling, which gives the same answer for the
   * capped count, and the count stays bounded as the table grows.
   */
  issuedTotal: number;
  /**
   * Free keys: verified and backed up (a key is free only once its batch is available), counted
   * only as far as the decision needs: up to the reserve plus one, plus the margin asked for.
   */
  freeKeys: number;
  networkToday: number;
  ipGroupToday: number;
};

export type ReadQuotaStateParams = {
  /** `YYYY-MM-DD`, UTC. */
  day: string;
  /** The hashed IP group whose count of the day is wanted. */
  ipGroup: string;
  /**
   * Free keys beyond the reserve plus one worth counting (0 by default): issuance counts one batch
   * more, to tell when the stock is near the reserve and the refill should be woken.
   */
  freeKeyMargin?: number;
};

/** The network-wide row of the per-day and per-minute counters. */
export const ALL_GROUPS = "*";

/**
 * The policy and every count the quotas of one IP group are judged on, in one statement, so one
 * snapshot: every figure is as of the same instant. Under the issuance lock it runs after the lock
 * is granted, so it sees every issuance committed before (READ COMMITTED takes a snapshot per
 * statement). Free keys are counted only as far as the decision needs: the reserve plus the one
 * key an issuance takes (plus `freeKeyMargin`).
 */
export async function readQuotaState(db: Db, params: ReadQuotaStateParams): Promise<RegistrationState> {
  const [row] = await queryRows<{
    paused: boolean;
    per_ip_daily: number;
    network_daily: number;
    total_ceiling: number;
    key_reserve: number;
    attempts_per_ip_per_minute: number;
    attempts_global_per_minute: number;
    issued_total: number;
    free_keys: number;
    network_today: number;
    ip_group_today: number;
  }>(
    db,
    sql`select p.paused, p.per_ip_daily, p.network_daily, p.total_ceiling, p.key_reserve,
          p.attempts_per_ip_per_minute, p.attempts_global_per_minute,
          (select count(*)::int from (select 1 from registration_issued
                                      limit p.total_ceiling) issued) as issued_total,
          -- In index order, so the scan stops at the limit: a bitmap scan (the planner's choice
          -- without the order) reads every free key's index entry first.
          (select count(*)::int from (select 1 from key_pool where status = 'free' order by created_at
                                      limit p.key_reserve + 1 + ${params.freeKeyMargin ?? 0}::int) free_keys) as free_keys,
          coalesce((select count from registration_admissions
                    where day = ${params.day} and ip_group = ${ALL_GROUPS}), 0) as network_today,
          coalesce((select count from registration_admissions
                    where day = ${params.day} and ip_group = ${params.ipGroup}), 0) as ip_group_today
        from registration_policy p where p.id = 1`,
  );
  if (!row) throw new Error("registration_policy row is missing: run the migrations");
  return {
    paused: row.paused,
    perIpDaily: row.per_ip_daily,
    networkDaily: row.network_daily,
    totalCeiling: row.total_ceiling,
    keyReserve: row.key_reserve,
    attemptsPerIpPerMinute: row.attempts_per_ip_per_minute,
    attemptsGlobalPerMinute: row.attempts_global_per_minute,
    issuedTotal: row.issued_total,
    freeKeys: row.free_keys,
    networkToday: row.network_today,
    ipGroupToday: row.ip_group_today,
  };
}

/** Why issuance is refused: a state of the service (503) or a spent daily quota (429). */
export type GateRefusal =
  | { code: "unavailable"; reason: "paused" | "total_ceiling" | "key_reserve" }
  | { code: "limited"; limit: "network_daily" | "per_ip_daily" };

/**
 * Refused (docs/api.md#registration-quotas-and-counters) while paused, at the total ceiling, when
 * free verified keys are at the reserve (one more issuance would leave fewer than the reserve; an
 * empty pool is the same case), and once the day's network-wide or per-group quota is spent. The
 * service's states come first: they are the same for every client.
 */
export function evaluateGate(state: RegistrationState): GateRefusal | null {
  if (state.paused) return { code: "unavailable", reason: "paused" };
  if (state.issuedTotal >= state.totalCeiling) return { code: "unavailable", reason: "total_ceiling" };
  if (state.freeKeys - 1 < state.keyReserve) return { code: "unavailable", reason: "key_reserve" };
  if (state.networkToday >= state.networkDaily) return { code: "limited", limit: "network_daily" };
  if (state.ipGroupToday >= state.perIpDaily) return { code: "limited", limit: "per_ip_daily" };
  return null;
}

/**
 * The request would pass every rule but the key reserve: the one refusal the key-pool refill can
 * lift while the request waits (docs/operations.md#the-key-pool-refills-on-demand).
 */
export function onlyShortOfKeys(state: RegistrationState): boolean {
  const refusal = evaluateGate(state);
  return (
    refusal?.code === "unavailable" &&
    refusal.reason === "key_reserve" &&
    evaluateGate({ ...state, freeKeys: Number.POSITIVE_INFINITY }) === null
  );
}
