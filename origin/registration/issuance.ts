import { sql } from "drizzle-orm";
import type { Capability } from "../../shared/constants.ts";
import type { Db } from "../db/client.ts";
import { claimKeyForIdentity, type ProvisionedIdentity } from "../keypool/provision.ts";
import { ALL_GROUPS, evaluateGate, type GateRefusal, readRegistrationState } from "./quota-gate.ts";

/** SPEC "Agent identity": public registration always gives read and transfer, never faucet. */
export const PUBLIC_CAPABILITIES: readonly Capability[] = ["read", "transfer"];

export type IssuePublicIdentityParams = {
  /** `YYYY-MM-DD`, UTC: the day whose quotas this issuance counts against. */
  day: string;
  /** The hashed IP group. */
  ipGroup: string;
};

export type IssuanceRefusal = GateRefusal | { kind: "unavailable"; reason: "unavailable" };

export type IssuePublicIdentityResult =
  | { ok: true; value: ProvisionedIdentity }
  | { ok: false; refusal: IssuanceRefusal };

/**
 * SPEC Limits rule 2: the quotas and the key assignment are committed together under one database
 * lock, the registration policy row. Every public issuance takes it first, so they run one after
 * another and each sees every count the one before committed; the per-group and network-wide
 * daily quotas, the total ceiling and the verified-key reserve are then checked on exact figures,
 * and the identity, its token, the key, the issuance record and the day's counts are written in
 * the same transaction. Operator provisioning does not take this lock, so it may use the reserve.
 */
export async function issuePublicIdentity(
  db: Db,
  params: IssuePublicIdentityParams,
): Promise<IssuePublicIdentityResult> {
  return db.transaction(async (tx): Promise<IssuePublicIdentityResult> => {
    await tx.execute(sql`select 1 from registration_policy where id = 1 for update`);
    const refusal = evaluateGate(await readRegistrationState(tx, params));
    if (refusal) return { ok: false, refusal };

    const claimed = await claimKeyForIdentity(tx, { capabilities: PUBLIC_CAPABILITIES, origin: "public" });
    if (!claimed.ok) {
      // Exhausted: the pool emptied (the reserve is then crossed too). Busy: every free row is being
      // claimed by operator provisioning at this instant.
      return {
        ok: false,
        refusal:
          claimed.error.code === "agent_key_pool_exhausted"
            ? { kind: "unavailable", reason: "key_reserve" }
            : { kind: "unavailable", reason: "unavailable" },
      };
    }
    await tx.execute(
      sql`with issued as (
            insert into registration_issued (agent_id, ip_group) values (${claimed.value.agentId}, ${params.ipGroup})
          )
          insert into registration_admissions (day, ip_group, count)
          values (${params.day}, ${params.ipGroup}, 1), (${params.day}, ${ALL_GROUPS}, 1)
          on conflict (day, ip_group) do update set count = registration_admissions.count + 1`,
    );
    return { ok: true, value: claimed.value };
  });
}
