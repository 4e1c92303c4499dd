import { sql } from "drizzle-orm";
import { err, ok, type Result } from "../../shared/result.ts";
import { type Db, queryRows } from "../db/client.ts";
import { ALL_GROUPS } from "./quota-gate.ts";

export type AdmitAttemptParams = {
  /** The start of the current minute (quota-clock.ts minuteStart). */
  minute: Date;
  /** The hashed IP group the attempt came from. */
  ipGroup: string;
  perIpLimit: number;
  globalLimit: number;
};

/** Admitted, or which limit it met. */
export type AdmitAttemptResult = Result<void, "per_ip" | "global">;

/**
 * An admission attempt is counted and committed on its own
 * (docs/api.md#registration-quotas-and-counters), before any provisioning, so a provisioning that
 * fails later still consumed it. The attempt is judged on exact counts: the group's row and then
 * the network-wide row are locked first (an upsert that changes nothing, which locks a row even
 * when another transaction has just inserted it), the attempt is counted in both only if the
 * group's count and then the network-wide count have room, and the new counts are written in the
 * same transaction. Every admission locks its group's row before the network-wide one, so two
 * admissions never wait on each other in a cycle, and the counts stay exact across nodes. A group
 * row this transaction created and did not count in is deleted again: a refused attempt leaves no
 * row.
 */
export async function admitAttempt(db: Db, params: AdmitAttemptParams): Promise<AdmitAttemptResult> {
  const { ipGroup, perIpLimit, globalLimit } = params;
  if (perIpLimit < 1) return err("per_ip");
  if (globalLimit < 1) return err("global");
  const minute = params.minute.toISOString();
  return db.transaction(async (tx) => {
    const locked = await queryRows<{ ip_group: string; count: number }>(
      tx,
      sql`insert into registration_attempts (minute, ip_group, count)
          select ${minute}::timestamptz, ip_group, 0
          from unnest(array[${ipGroup}::text, ${ALL_GROUPS}::text]) with ordinality as t(ip_group, n)
          order by n
          on conflict (minute, ip_group) do update set count = registration_attempts.count
          returning ip_group, count`,
    );
    const counts = new Map(locked.map((row) => [row.ip_group, row.count]));
    const groupCount = counts.get(ipGroup)!;
    const verdict: AdmitAttemptResult =
      groupCount >= perIpLimit
        ? err("per_ip")
        : counts.get(ALL_GROUPS)! >= globalLimit
          ? err("global")
          : ok(undefined);
    // Attempt counts guard against floods; losing the last instant's counts in a crash is
    // harmless, so this transaction's commit does not wait for the disk (issuance does).
    await tx.execute(
      verdict.ok
        ? sql`with counted as (
                update registration_attempts set count = count + 1
                where minute = ${minute} and ip_group in (${ipGroup}, ${ALL_GROUPS})
              )
              select set_config('synchronous_commit', 'off', true)`
        : sql`with unused as (
                delete from registration_attempts
                where minute = ${minute} and ip_group = ${ipGroup} and count = 0
              )
              select set_config('synchronous_commit', 'off', true)`,
    );
    return verdict;
  });
}
