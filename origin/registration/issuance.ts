import { sql } from "drizzle-orm";
import type { Capability } from "../../shared/constants.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import type { Db } from "../db/client.ts";
import { transactionAnsweringLostCommit } from "../db/lost-commit.ts";
import { claimKeyForIdentity, type ProvisionedIdentity } from "../keypool/provision.ts";
import type { ProvenProof } from "./proof-gate.ts";
import { ALL_GROUPS, evaluateGate, type GateRefusal, readQuotaState } from "./quota-gate.ts";

/**
 * Public registration always gives read and transfer, never faucet
 * (docs/api.md#registration-what-a-request-must-be).
 */
export const PUBLIC_CAPABILITIES: readonly Capability[] = ["read", "transfer"];

export type IssuePublicIdentityParams = {
  /** `YYYY-MM-DD`, UTC: the day whose quotas this issuance counts against. */
  day: string;
  /** The hashed IP group the registration came from. */
  ipGroup: string;
  /** Free keys beyond the reserve worth counting for `freeKeysLeft` (quota-gate.ts). */
  freeKeyMargin?: number;
  /**
   * With the proof of work on: the request's proof. Under the lock it must still answer the state
   * (proof-gate.ts), so one solution makes one identity at most, and concurrent solutions of
   * challenges asked for while the day was emptier are not all let in at that day's price.
   */
  proof?: ProvenProof | undefined;
  /** The client's request: gone once its turn at the lock comes, nothing is issued for it. */
  signal?: AbortSignal | undefined;
};

export type IssuanceRefusal =
  | GateRefusal
  | { code: "unavailable"; reason: "unavailable" }
  /** The proof no longer answers the state under the lock (proof-gate.ts ProvenProof). */
  | { code: "proof_spent" };

export type IssuedIdentity = ProvisionedIdentity & {
  /**
   * Free keys left after this issuance, counted up to the reserve plus `freeKeyMargin`: below that
   * the stock is near the reserve and the refill is woken.
   */
  freeKeysLeft: number;
};

export type IssuePublicIdentityResult = Result<IssuedIdentity, IssuanceRefusal>;

/** The issuance, or `client_gone`: the client left while it waited for the lock, and nothing was written. */
export type IssueForClientResult = IssuePublicIdentityResult | "client_gone";

/**
 * The quotas and the key assignment are committed together under one database lock, the
 * registration policy row (docs/api.md#registration-quotas-and-counters). Every public issuance
 * takes it first, so issuances run one transaction after another, on every node, and each sees
 * every count the one before committed. Under the lock the request is judged against exact figures
 * (the per-group and network daily quotas, the total ceiling, and the verified-key reserve: free
 * keys after the claim stay at or above it), and the identity, token, key, issuance record and the
 * day's counts are written in the same transaction. Operator provisioning does not take this lock,
 * so it may use the reserve.
 */
export async function issuePublicIdentity(
  db: Db,
  params: IssuePublicIdentityParams,
): Promise<IssueForClientResult> {
  const { day, ipGroup, freeKeyMargin, proof, signal } = params;
  // The link to the database lost once the identity is written: its commit may have reached
  // Postgres with only the answer lost. Refused then, the client would register again (a 503 says
  // "retry"), and this identity, its key and its place in the day's quotas would be taken by a
  // token nobody was ever shown. Its token is still here: shown if it was made.
  return transactionAnsweringLostCommit(db, async (tx, committing): Promise<IssueForClientResult> => {
    await tx.execute(sql`select 1 from registration_policy where id = 1 for update`);
    // Every node's issuances queue here one after another, so under a flood this is where a
    // request waits longest, and where its client gives up.
    if (signal?.aborted) return "client_gone";
    // After the lock is granted: this statement sees every issuance committed before.
    const state = await readQuotaState(tx, { day, ipGroup, freeKeyMargin });
    const refusal = evaluateGate(state);
    if (refusal) return err(refusal);
    if (proof && !proof.answers(state)) return err({ code: "proof_spent" });

    const claimed = await claimKeyForIdentity(tx, { capabilities: PUBLIC_CAPABILITIES, origin: "public" });
    if (!claimed.ok) {
      // Exhausted: the pool emptied (the reserve is crossed too). Busy: the free rows left are
      // being claimed by operator provisioning at this instant.
      return err(
        claimed.error.code === "agent_key_pool_exhausted"
          ? { code: "unavailable", reason: "key_reserve" }
          : { code: "unavailable", reason: "unavailable" },
      );
    }
    const { agentId } = claimed.value;
    await recordIssued(tx, day, { agentId, ipGroup });
    return committing(ok({ ...claimed.value, freeKeysLeft: state.freeKeys - 1 }), {
      // The issuance held the policy row's lock from its first statement until its end.
      awaitEnd: sql`select 1 from registration_policy where id = 1 for share`,
      made: sql`select 1 from registration_issued where agent_id = ${agentId}::uuid`,
    });
  });
}

/**
 * The issuance record and the day's counts (the group's, and network-wide) of one issuance; and a
 * node-wide refusal reported before is over (refusal-report.ts), changing nothing when none was.
 */
async function recordIssued(
  tx: Db,
  day: string,
  issued: { agentId: string; ipGroup: string },
): Promise<void> {
  await tx.execute(
    sql`with issued as (
          insert into registration_issued (agent_id, ip_group)
          values (${issued.agentId}::uuid, ${issued.ipGroup})
        ), refusal_over as (
          update registration_refusal_state set refusing = null, day = null, since = now()
          where singleton = 1 and refusing is not null
        )
        insert into registration_admissions (day, ip_group, count)
        values (${day}::date, ${issued.ipGroup}, 1), (${day}::date, ${ALL_GROUPS}, 1)
        on conflict (day, ip_group) do update set count = registration_admissions.count + excluded.count`,
  );
}
