import { sql } from "drizzle-orm";
import type { Capability } from "../../shared/constants.ts";
import { type Db, queryRows } from "../db/client.ts";
import { claimKeysForIdentities, type ProvisionedIdentity } from "../keypool/provision.ts";
import { ALL_GROUPS, evaluateGate, type GateRefusal, type RegistrationState } from "./quota-gate.ts";

/** SPEC "Agent identity": public registration always gives read and transfer, never faucet. */
export const PUBLIC_CAPABILITIES: readonly Capability[] = ["read", "transfer"];

export type IssuePublicIdentitiesParams = {
  /** `YYYY-MM-DD`, UTC: the day whose quotas these issuances count against. */
  day: string;
  /** One entry per registration, in arrival order: the hashed IP group it came from. */
  requests: readonly { ipGroup: string }[];
};

export type IssuanceRefusal = GateRefusal | { kind: "unavailable"; reason: "unavailable" };

export type IssuePublicIdentityResult =
  | { ok: true; value: ProvisionedIdentity }
  | { ok: false; refusal: IssuanceRefusal };

/**
 * SPEC Limits rule 2: the quotas and the key assignment are committed together under one database
 * lock, the registration policy row. Every public issuance takes it first, so issuances run one
 * transaction after another and each sees every count the one before committed. Under the lock,
 * the requests of a batch are judged in order against exact figures (the per-group and network
 * daily quotas, the total ceiling, and the verified-key reserve: free keys after each claim stay at
 * or above it), and the identities, tokens, keys, issuance records and the day's counts of those
 * admitted are written in the same transaction. A batch shares one lock and one commit, which is
 * what lets issuance keep up although the lock is held until the commit is on disk. Operator
 * provisioning does not take this lock, so it may use the reserve.
 */
export async function issuePublicIdentities(
  db: Db,
  params: IssuePublicIdentitiesParams,
): Promise<IssuePublicIdentityResult[]> {
  const { day, requests } = params;
  return db.transaction(async (tx): Promise<IssuePublicIdentityResult[]> => {
    await tx.execute(sql`select 1 from registration_policy where id = 1 for update`);
    const groups = [...new Set(requests.map((request) => request.ipGroup))];
    const state = await readBatchState(tx, day, groups, requests.length);

    // Judged in arrival order, each admission counted before the next is judged.
    const results: (IssuePublicIdentityResult | undefined)[] = new Array(requests.length);
    const admitted: number[] = [];
    const perGroup = new Map(state.groupCounts);
    requests.forEach((request, index) => {
      const refusal = evaluateGate({
        ...state.policy,
        issuedTotal: state.policy.issuedTotal + admitted.length,
        freeKeys: state.policy.freeKeys - admitted.length,
        networkToday: state.policy.networkToday + admitted.length,
        ipGroupToday: perGroup.get(request.ipGroup) ?? 0,
      });
      if (refusal) results[index] = { ok: false, refusal };
      else {
        admitted.push(index);
        perGroup.set(request.ipGroup, (perGroup.get(request.ipGroup) ?? 0) + 1);
      }
    });
    if (admitted.length === 0) return results as IssuePublicIdentityResult[];

    const claimed = await claimKeysForIdentities(tx, {
      count: admitted.length,
      capabilities: PUBLIC_CAPABILITIES,
      origin: "public",
    });
    // Exhausted: the pool emptied (the reserve is crossed too). Busy: the free rows left are being
    // claimed by operator provisioning at this instant.
    const identities = claimed.ok ? claimed.value : [];
    const shortfall: IssuanceRefusal =
      !claimed.ok && claimed.error.code === "agent_key_pool_exhausted"
        ? { kind: "unavailable", reason: "key_reserve" }
        : { kind: "unavailable", reason: "unavailable" };
    const issued: { agentId: string; ipGroup: string }[] = [];
    admitted.forEach((index, n) => {
      const identity = identities[n];
      if (!identity) {
        results[index] = { ok: false, refusal: shortfall };
        return;
      }
      results[index] = { ok: true, value: identity };
      issued.push({ agentId: identity.agentId, ipGroup: requests[index]!.ipGroup });
    });
    if (issued.length > 0) await recordIssued(tx, day, issued);
    return results as IssuePublicIdentityResult[];
  });
}

type BatchState = { policy: RegistrationState; groupCounts: Map<string, number> };

/**
 * The policy and every count the batch is judged on, in one statement after the lock is granted,
 * so it sees every issuance committed before (READ COMMITTED takes a snapshot per statement).
 * Free keys are counted only as far as the decisions need (the reserve, plus one per request).
 */
async function readBatchState(tx: Db, day: string, groups: string[], size: number): Promise<BatchState> {
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
    group_counts: Record<string, number> | null;
  }>(
    tx,
    sql`select p.paused, p.per_ip_daily, p.network_daily, p.total_ceiling, p.key_reserve,
          p.attempts_per_ip_per_minute, p.attempts_global_per_minute,
          (select count(*)::int from registration_issued) as issued_total,
          (select count(*)::int from (select 1 from key_pool where status = 'free'
                                      limit p.key_reserve + ${size} + 1) free_keys) as free_keys,
          coalesce((select count from registration_admissions
                    where day = ${day} and ip_group = ${ALL_GROUPS}), 0) as network_today,
          (select json_object_agg(ip_group, count) from registration_admissions
           where day = ${day} and ip_group in (${sql.join(
             groups.map((group) => sql`${group}`),
             sql`, `,
           )})) as group_counts
        from registration_policy p where p.id = 1`,
  );
  if (!row) throw new Error("registration_policy row is missing: run the migrations");
  return {
    policy: {
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
      ipGroupToday: 0,
    },
    groupCounts: new Map(Object.entries(row.group_counts ?? {})),
  };
}

/** The issuance records and the day's counts (per group, and network-wide) of one batch. */
async function recordIssued(
  tx: Db,
  day: string,
  issued: { agentId: string; ipGroup: string }[],
): Promise<void> {
  const counts = new Map<string, number>([[ALL_GROUPS, issued.length]]);
  for (const { ipGroup } of issued) counts.set(ipGroup, (counts.get(ipGroup) ?? 0) + 1);
  await tx.execute(
    sql`with issued as (
          insert into registration_issued (agent_id, ip_group)
          values ${sql.join(
            issued.map(({ agentId, ipGroup }) => sql`(${agentId}::uuid, ${ipGroup})`),
            sql`, `,
          )}
        )
        insert into registration_admissions (day, ip_group, count)
        values ${sql.join(
          [...counts].map(([group, count]) => sql`(${day}::date, ${group}, ${count}::int)`),
          sql`, `,
        )}
        on conflict (day, ip_group) do update set count = registration_admissions.count + excluded.count`,
  );
}
