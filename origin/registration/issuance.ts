import { sql } from "drizzle-orm";
import type { Capability } from "../../shared/constants.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import type { Db } from "../db/client.ts";
import { claimKeysForIdentities, type ProvisionedIdentity } from "../keypool/provision.ts";
import { ALL_GROUPS, evaluateGate, type GateRefusal, readQuotaState } from "./quota-gate.ts";

/** SPEC "Agent identity": public registration always gives read and transfer, never faucet. */
export const PUBLIC_CAPABILITIES: readonly Capability[] = ["read", "transfer"];

export type IssuePublicIdentitiesParams = {
  /** `YYYY-MM-DD`, UTC: the day whose quotas these issuances count against. */
  day: string;
  /** One entry per registration, in arrival order: the hashed IP group it came from. */
  requests: readonly { ipGroup: string }[];
};

export type IssuanceRefusal = GateRefusal | { kind: "unavailable"; reason: "unavailable" };

export type IssuePublicIdentityResult = Result<ProvisionedIdentity, IssuanceRefusal>;

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
    // After the lock is granted: this statement sees every issuance committed before.
    const state = await readQuotaState(tx, { day, ipGroups: groups, keysWanted: requests.length + 1 });

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
      if (refusal) results[index] = err(refusal);
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
        results[index] = err(shortfall);
        return;
      }
      results[index] = ok(identity);
      issued.push({ agentId: identity.agentId, ipGroup: requests[index]!.ipGroup });
    });
    if (issued.length > 0) await recordIssued(tx, day, issued);
    return results as IssuePublicIdentityResult[];
  });
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
