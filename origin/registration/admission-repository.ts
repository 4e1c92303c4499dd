import { sql } from "drizzle-orm";
import { type Db, pgArrayLiteral, queryRows } from "../db/client.ts";
import { ALL_GROUPS } from "./quota-gate.ts";

export type AdmitAttemptsParams = {
  /** The start of the current minute (quota-clock.ts minuteStart). */
  minute: Date;
  /** One entry per attempt, in arrival order: the hashed IP group it came from. */
  ipGroups: readonly string[];
  perIpLimit: number;
  globalLimit: number;
};

export type AdmitAttemptResult = { ok: true } | { ok: false; limit: "per_ip" | "global" };

/**
 * SPEC Limits rule 1: an admission attempt is counted and committed on its own, before any
 * provisioning, so a provisioning that fails later still consumed it. Attempts of one minute are
 * judged in arrival order against exact counts: the rows of their groups and the network-wide row
 * are locked first (an upsert that changes nothing, which locks a row even when another
 * transaction has just inserted it), each attempt is judged on the group's count, then the
 * network-wide count, and counted in both only if both have room, and the new counts are
 * written in the same transaction. Rows are always locked groups first (in sorted order), then
 * the network-wide row, so two admissions never wait on each other in a cycle. A group row this
 * transaction created and did not count in is deleted again: a refused attempt leaves no row.
 */
export async function admitAttempts(db: Db, params: AdmitAttemptsParams): Promise<AdmitAttemptResult[]> {
  const { ipGroups, perIpLimit, globalLimit } = params;
  if (perIpLimit < 1) return ipGroups.map(() => ({ ok: false, limit: "per_ip" }));
  if (globalLimit < 1) return ipGroups.map(() => ({ ok: false, limit: "global" }));
  const minute = params.minute.toISOString();
  const groups = [...new Set(ipGroups)].sort();
  return db.transaction(async (tx) => {
    const locked = await queryRows<{ ip_group: string; count: number }>(
      tx,
      sql`insert into registration_attempts (minute, ip_group, count)
          select ${minute}::timestamptz, ip_group, 0
          from unnest(${pgArrayLiteral(groups)}::text[] || ${ALL_GROUPS}::text) with ordinality as t(ip_group, n)
          order by n
          on conflict (minute, ip_group) do update set count = registration_attempts.count
          returning ip_group, count`,
    );
    const counts = new Map(locked.map((row) => [row.ip_group, row.count]));
    const before = new Map(counts);
    const results = ipGroups.map((group): AdmitAttemptResult => {
      const groupCount = counts.get(group)!;
      const globalCount = counts.get(ALL_GROUPS)!;
      if (groupCount >= perIpLimit) return { ok: false, limit: "per_ip" };
      if (globalCount >= globalLimit) return { ok: false, limit: "global" };
      counts.set(group, groupCount + 1);
      counts.set(ALL_GROUPS, globalCount + 1);
      return { ok: true };
    });
    const counted = groups.filter((group) => counts.get(group) !== before.get(group));
    const unused = groups.filter((group) => counts.get(group) === 0);
    await tx.execute(
      sql`with counted as (
            update registration_attempts set count = v.count
            from unnest(${pgArrayLiteral(counted)}::text[],
                        ${pgArrayLiteral(counted.map((group) => counts.get(group)!))}::int[]) as v(ip_group, count)
            where registration_attempts.minute = ${minute} and registration_attempts.ip_group = v.ip_group
          ), network as (
            update registration_attempts set count = ${counts.get(ALL_GROUPS)!}
            where minute = ${minute} and ip_group = ${ALL_GROUPS}
          ), unused as (
            delete from registration_attempts
            where minute = ${minute} and ip_group = any(${pgArrayLiteral(unused)}::text[]) and count = 0
          )
          -- Attempt counts guard against floods; losing the last instant's counts in a crash is
          -- harmless, so this transaction's commit does not wait for the disk (issuance does).
          select set_config('synchronous_commit', 'off', true)`,
    );
    return results;
  });
}
