import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../db/client.ts";
import { ALL_GROUPS } from "./quota-gate.ts";

export type AdmitAttemptParams = {
  /** The start of the current minute (quota-clock.ts minuteStart). */
  minute: Date;
  /** The hashed IP group. */
  ipGroup: string;
  perIpLimit: number;
  globalLimit: number;
};

export type AdmitAttemptResult = { ok: true } | { ok: false; limit: "per_ip" | "global" };

/** Thrown inside the transaction to roll the group's count back when the global count is full. */
class GlobalFull extends Error {}

/**
 * SPEC Limits rule 1: an admission attempt is counted and committed on its own, before any
 * provisioning, so a provisioning that fails later still consumed it. Both counts move or
 * neither does: the group's row and the network-wide row are upserted in one statement whose
 * updates only apply below the limit (the row lock of ON CONFLICT DO UPDATE re-checks the
 * condition against the latest count, so concurrent attempts cannot overshoot), and a group
 * admitted while the global row is full is rolled back. Rows are always locked group first,
 * then global, so two admissions never wait on each other in a cycle.
 */
export async function admitAttempt(db: Db, params: AdmitAttemptParams): Promise<AdmitAttemptResult> {
  // A fresh row starts at 1 without checking the condition, so a limit of 0 is decided here.
  if (params.perIpLimit < 1) return { ok: false, limit: "per_ip" };
  if (params.globalLimit < 1) return { ok: false, limit: "global" };
  try {
    return await db.transaction(async (tx) => {
      const [row] = await queryRows<{ group_count: number | null; global_count: number | null }>(
        tx,
        sql`with ip_group as (
              insert into registration_attempts (minute, ip_group, count)
              values (${params.minute.toISOString()}, ${params.ipGroup}, 1)
              on conflict (minute, ip_group) do update set count = registration_attempts.count + 1
                where registration_attempts.count < ${params.perIpLimit}
              returning count
            ), all_groups as (
              insert into registration_attempts (minute, ip_group, count)
              select ${params.minute.toISOString()}, ${ALL_GROUPS}, 1 where exists (select 1 from ip_group)
              on conflict (minute, ip_group) do update set count = registration_attempts.count + 1
                where registration_attempts.count < ${params.globalLimit}
              returning count
            )
            -- Attempt counts guard against floods; losing the last instant's counts in a crash is
            -- harmless, so this transaction's commit does not wait for the disk (issuance does).
            select (select count from ip_group) as group_count, (select count from all_groups) as global_count,
                   set_config('synchronous_commit', 'off', true) as commit_mode`,
      );
      if (row?.group_count == null) return { ok: false, limit: "per_ip" } as const;
      if (row.global_count == null) throw new GlobalFull();
      return { ok: true } as const;
    });
  } catch (error) {
    if (error instanceof GlobalFull) return { ok: false, limit: "global" };
    throw error;
  }
}
