import { sql } from "drizzle-orm";
import { err, ok, type Result } from "../../shared/result.ts";
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

/** Admitted, or which limit it met. */
export type AdmitAttemptResult = Result<void, "per_ip" | "global">;

/**
 * SPEC Limits rule 1: an admission attempt is counted and committed on its own, before any
 * provisioning, so a provisioning that fails later still consumed it. Attempts of one minute are
 * judged in arrival order against exact counts. Usually every attempt of a batch has room, and one
 * statement counts them all (countAllIfRoom); near a limit, the attempts are judged one by one
 * under the rows' locks (judgeInOrder). Rows are always locked groups first (in sorted order),
 * then the network-wide row, so two admissions never wait on each other in a cycle.
 */
export async function admitAttempts(db: Db, params: AdmitAttemptsParams): Promise<AdmitAttemptResult[]> {
  const { ipGroups, perIpLimit, globalLimit } = params;
  if (perIpLimit < 1) return ipGroups.map(() => err("per_ip"));
  if (globalLimit < 1) return ipGroups.map(() => err("global"));
  const perGroup = new Map<string, number>();
  for (const group of ipGroups) perGroup.set(group, (perGroup.get(group) ?? 0) + 1);
  const fits = [...perGroup.values()].every((n) => n <= perIpLimit) && ipGroups.length <= globalLimit;
  if (fits && (await countAllIfRoom(db, { ...params, perGroup }))) return ipGroups.map(() => ok(undefined));
  return judgeInOrder(db, params);
}

/** Marks the error countAllIfRoom raises to undo its statement when an attempt has no room. */
const NO_ROOM = "registration attempts without room";

/**
 * Counts every attempt in one statement if every group's count and the network-wide count have
 * room for all of them; otherwise counts none and answers false. Each upsert re-checks its
 * condition against the latest count under the row's lock, so concurrent admissions cannot
 * overshoot. A statement is atomic, so when one count had no room the statement raises an error
 * (a cast that cannot succeed; SQL has no RAISE) and every count it moved is undone.
 */
async function countAllIfRoom(
  db: Db,
  params: AdmitAttemptsParams & { perGroup: Map<string, number> },
): Promise<boolean> {
  const groups = [...params.perGroup.keys()].sort();
  const minute = params.minute.toISOString();
  try {
    await db.execute(
      sql`with counted as (
            insert into registration_attempts (minute, ip_group, count)
            select ${minute}::timestamptz, ip_group, n
            from unnest(${pgArrayLiteral(groups)}::text[],
                        ${pgArrayLiteral(groups.map((group) => params.perGroup.get(group)!))}::int[])
                 with ordinality as t(ip_group, n, i)
            order by i
            on conflict (minute, ip_group) do update set count = registration_attempts.count + excluded.count
              where registration_attempts.count + excluded.count <= ${params.perIpLimit}
            returning 1
          ), network as (
            insert into registration_attempts (minute, ip_group, count)
            select ${minute}::timestamptz, ${ALL_GROUPS}, ${params.ipGroups.length}::int
            where (select count(*) from counted) = ${groups.length}
            on conflict (minute, ip_group) do update set count = registration_attempts.count + excluded.count
              where registration_attempts.count + excluded.count <= ${params.globalLimit}
            returning 1
          )
          -- Attempt counts guard against floods; losing the last instant's counts in a crash is
          -- harmless, so this commit does not wait for the disk (issuance does).
          select case when exists (select 1 from network) then set_config('synchronous_commit', 'off', true)
                      -- Not a constant, or the planner would fold it and raise every time.
                      else (${NO_ROOM} || (select count(*) from counted))::int::text end`,
    );
    return true;
  } catch (error) {
    if (isNoRoom(error)) return false;
    throw error;
  }
}

function isNoRoom(error: unknown): boolean {
  // drizzle wraps the driver's error: follow the causes, a few levels deep.
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth++) {
    if ((current as { code?: unknown }).code === "22P02" && current.message.includes(NO_ROOM)) return true;
    current = current.cause;
  }
  return false;
}

/**
 * Judges each attempt in arrival order on exact counts: the rows of the groups and the
 * network-wide row are locked first (an upsert that changes nothing, which locks a row even when
 * another transaction has just inserted it), each attempt is counted in both only if the group's
 * count and then the network-wide count have room, and the new counts are written in the same
 * transaction. A group row this transaction created and did not count in is deleted again: a
 * refused attempt leaves no row.
 */
async function judgeInOrder(db: Db, params: AdmitAttemptsParams): Promise<AdmitAttemptResult[]> {
  const { ipGroups, perIpLimit, globalLimit } = params;
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
      if (groupCount >= perIpLimit) return err("per_ip");
      if (globalCount >= globalLimit) return err("global");
      counts.set(group, groupCount + 1);
      counts.set(ALL_GROUPS, globalCount + 1);
      return ok(undefined);
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
