import { sql } from "drizzle-orm";
import type { Audit, OperationsOverview, RegistrationOverview } from "../../shared/console-schemas.ts";
import { type Db, queryRows } from "../db/client.ts";
import { RESTORE_METHOD_NEW_ENCLAVE } from "../db/schema.ts";
import { poolStock } from "../keypool/batch-repository.ts";
import { readStateCounts } from "../metrics/state-counts.ts";
import { getRegistrationPolicy } from "../registration/policy-repository.ts";
import { minuteStart, utcDay } from "../registration/quota-clock.ts";
import { ALL_GROUPS } from "../registration/quota-gate.ts";
import { REGISTRATION_SETTINGS, settingsView } from "../registration/settings.ts";

/**
 * The console's database reads. Read only: no counter moves
 * (docs/api.md#registration-quotas-and-counters).
 */

const iso = (value: Date | string): string => new Date(value).toISOString();

export type PersistentRegistration = Omit<
  RegistrationOverview,
  "generated_at" | "setting_ranges" | "local_buckets"
>;

/** Policy, persistent counters, key stock, the last 50 public identities and the IP groups. */
export async function readPersistentRegistration(db: Db, now: Date): Promise<PersistentRegistration> {
  const day = utcDay(now);
  const minute = minuteStart(now).toISOString();
  const hourAgo = new Date(minuteStart(now).getTime() - 59 * 60_000).toISOString();
  const [policy, stock, batchRows, counterRows, identities, groups] = await Promise.all([
    getRegistrationPolicy(db),
    poolStock(db),
    queryRows<{ batches: number }>(
      db,
      sql`select count(*)::int as batches from key_batches
          where status in ('requested','generated','backup_written','backup_verified')`,
    ),
    queryRows<{ issued_total: number; issued_today: number; attempts_minute: number; attempts_hour: number }>(
      db,
      sql`select (select count(*)::int from registration_issued) as issued_total,
                 coalesce((select count from registration_admissions
                           where day = ${day} and ip_group = ${ALL_GROUPS}), 0) as issued_today,
                 coalesce((select count from registration_attempts
                           where minute = ${minute} and ip_group = ${ALL_GROUPS}), 0) as attempts_minute,
                 coalesce((select sum(count)::int from registration_attempts
                           where minute >= ${hourAgo} and ip_group = ${ALL_GROUPS}), 0) as attempts_hour`,
    ),
    queryRows<{
      agent_id: string;
      assigned_wallet: string;
      enabled: boolean;
      revoked: boolean;
      disabled_reason: string | null;
      created_at: Date;
      ip_group: string | null;
    }>(
      db,
      sql`select i.agent_id, i.assigned_wallet, i.enabled, i.revoked, i.disabled_reason, i.created_at,
                 r.ip_group
          from agent_identities i left join registration_issued r on r.agent_id = i.agent_id
          where i.origin = 'public' order by i.created_at desc, i.agent_id limit 50`,
    ),
    queryRows<{
      ip_group: string;
      issued_total: number;
      issued_today: number;
      attempts_minute: number;
      attempts_hour: number;
      last_issued_at: Date | null;
    }>(
      db,
      sql`with issued as (
            select ip_group, count(*)::int as n, max(issued_at) as last from registration_issued
            group by ip_group
          ), hour as (
            select ip_group, sum(count)::int as n, max(minute) as last,
                   sum(count) filter (where minute = ${minute})::int as this_minute
            from registration_attempts where minute >= ${hourAgo} and ip_group <> ${ALL_GROUPS}
            group by ip_group
          ), today as (
            select ip_group, count from registration_admissions
            where day = ${day} and ip_group <> ${ALL_GROUPS}
          ), latest as (
            select ip_group from issued order by last desc limit 100
          ), groups as (
            select ip_group from hour union select ip_group from today union select ip_group from latest
          )
          select g.ip_group, coalesce(issued.n, 0) as issued_total, coalesce(today.count, 0) as issued_today,
                 coalesce(hour.this_minute, 0) as attempts_minute, coalesce(hour.n, 0) as attempts_hour,
                 issued.last as last_issued_at
          from groups g
            left join issued on issued.ip_group = g.ip_group
            left join hour on hour.ip_group = g.ip_group
            left join today on today.ip_group = g.ip_group
          order by greatest(issued.last, hour.last) desc nulls last, g.ip_group
          limit 100`,
    ),
  ]);
  const counters = counterRows[0]!;
  return {
    settings: settingsView(policy) as PersistentRegistration["settings"],
    settings_updated_at: iso(policy.updatedAt),
    counters: {
      issued_total: counters.issued_total,
      issued_today: counters.issued_today,
      attempts_this_minute: counters.attempts_minute,
      attempts_last_hour: counters.attempts_hour,
      utc_day: day,
    },
    key_stock: {
      free: stock.free,
      in_flight_batches: batchRows[0]!.batches,
      in_flight_keys: stock.pendingInBatches,
      reserve: policy.keyReserve,
      issuable_before_reserve: Math.max(0, stock.free - policy.keyReserve),
    },
    identities: identities.map((row) => ({
      agent_id: row.agent_id,
      assigned_wallet: row.assigned_wallet,
      enabled: row.enabled,
      revoked: row.revoked,
      disabled_reason: row.disabled_reason,
      created_at: iso(row.created_at),
      ip_group: row.ip_group,
    })),
    ip_groups: groups.map((row) => ({
      ip_group: row.ip_group,
      issued_total: row.issued_total,
      issued_today: row.issued_today,
      attempts_this_minute: row.attempts_minute,
      attempts_last_hour: row.attempts_hour,
      last_issued_at: row.last_issued_at ? iso(row.last_issued_at) : null,
    })),
  };
}

/** Findings, batches, actions, settlements and active funding exceptions. */
export async function readOperations(db: Db, now: Date): Promise<Omit<OperationsOverview, "generated_at">> {
  const [counts, findings, actions, exceptions, drills] = await Promise.all([
    readStateCounts(db),
    queryRows<{ agent_id: string; class: string; code: string; at: Date }>(
      db,
      sql`select agent_id, class, code, at from identity_findings order by at desc limit 20`,
    ),
    queryRows<{
      action_id: string;
      agent_id: string;
      kind: string;
      status: string;
      amount_units: string | null;
      to_address: string | null;
      tx_hash: string | null;
      error_code: string | null;
      updated_at: Date;
    }>(
      db,
      sql`select action_id, agent_id, kind, status, amount_units::text as amount_units, to_address, tx_hash,
                 error_code, updated_at
          from agent_actions order by updated_at desc limit 20`,
    ),
    queryRows<{
      id: string;
      wallet: string;
      ceiling_units: string;
      reason: string;
      approved_at: Date;
      expires_at: Date;
    }>(
      db,
      sql`select id, wallet, ceiling_units::text as ceiling_units, reason, approved_at, expires_at
          from funding_exceptions
          where revoked_at is null and expires_at > ${now.toISOString()}
          order by approved_at desc limit 100`,
    ),
    // Every available batch counted, the undrilled listed up to 50 (the page stays small however
    // many batches a node has made): a row per undrilled batch, then one row with the totals.
    queryRows<{
      batch_id: string | null;
      keys: number;
      created_at: Date | null;
      drilled: number;
      undrilled: number;
    }>(
      db,
      sql`with available as (
            select b.batch_id, b.size, b.created_at, exists (select 1 from restore_evidence r
              where r.batch_id = b.batch_id and r.method = ${RESTORE_METHOD_NEW_ENCLAVE}) as drilled
            from key_batches b where b.status = 'available')
          (select batch_id, size as keys, created_at, 0 as drilled, 0 as undrilled
             from available where not drilled order by created_at, batch_id limit 50)
          union all
          select null, 0, null, (count(*) filter (where drilled))::int, (count(*) filter (where not drilled))::int
            from available`,
    ),
  ]);
  const totals = drills.find((row) => row.batch_id === null);
  const undrilled = drills.filter((row) => row.batch_id !== null);
  return {
    identity_findings: {
      by_class: counts.findings.map((row) => ({ class: row.class, count: row.count, last_at: row.lastAt })),
      recent: findings.map((row) => ({ ...row, at: iso(row.at) })),
    },
    key_batches: {
      by_state: counts.batches,
      drills: {
        drilled: totals?.drilled ?? 0,
        undrilled_count: totals?.undrilled ?? 0,
        undrilled: undrilled.map((row) => ({
          batch_id: row.batch_id!,
          keys: row.keys,
          created_at: iso(row.created_at!),
        })),
      },
    },
    actions: {
      by_state: counts.actions,
      recent: actions.map((row) => ({
        action_id: row.action_id,
        agent_id: row.agent_id,
        kind: row.kind,
        status: row.status,
        amount: row.amount_units,
        to: row.to_address,
        tx_hash: row.tx_hash,
        error_code: row.error_code,
        updated_at: iso(row.updated_at),
      })),
    },
    x402_settlements: { by_state: counts.settlements },
    funding_exceptions: {
      active: exceptions.map((row) => ({
        ...row,
        approved_at: iso(row.approved_at),
        expires_at: iso(row.expires_at),
      })),
    },
  };
}

const SETTING_NAMES = new Map<string, string>(
  Object.entries(REGISTRATION_SETTINGS).map(([name, rule]) => [rule.key, name]),
);

/**
 * Who a change names (docs/api.md#the-operator-console): the operator signed in with a passkey, or
 * nobody for the shared admin tokens and the operator tools.
 */
export const AUDIT_NOTE =
  "A change records what changed, when and why, and the channel it came through. A change made " +
  "signed in with a passkey, or approved with one, names the operator and the passkey; a change made " +
  "with the shared admin tokens or the operator tools names no one.";

/**
 * Every recorded change, newest first: registration settings, identity disable/enable/revoke,
 * funding exceptions, webhook endpoints and passkey approvals, each with its before, after, reason
 * and, when known, the operator and passkey behind it.
 */
export async function readAudit(db: Db, limit = 200): Promise<Audit> {
  const rows = await queryRows<{
    kind: Audit["changes"][number]["kind"];
    subject: string;
    change: string;
    before: string | null;
    after: string;
    reason: string;
    source: string | null;
    operator: string | null;
    passkey_key_id: string | null;
    at: Date;
  }>(
    db,
    sql`(select 'registration_setting' as kind, setting as subject, 'set' as change,
                before_value as before, after_value as after, reason, source,
                operator, passkey_key_id, changed_at as at
         from registration_policy_changes order by changed_at desc limit ${limit})
        union all
        -- A revocation leaves the enabled flag alone: its after is the identity's final state.
        (select 'identity', agent_id::text, change,
                case when before_enabled then 'enabled' else 'disabled' end,
                case when change = 'revoke' then 'revoked' when after_enabled then 'enabled' else 'disabled' end,
                reason, source, operator, passkey_key_id, changed_at
         from identity_changes order by changed_at desc limit ${limit})
        union all
        -- Funding exceptions have one channel, the funding CLI: the console cannot grant them.
        (select 'funding_exception', exception_id::text, change, before::text, after::text, reason, 'cli',
                null, null, changed_at
         from funding_exception_changes order by changed_at desc limit ${limit})
        union all
        (select 'webhook_endpoint', endpoint_id::text, change, before, after, coalesce(reason, ''), source,
                operator, passkey_key_id, changed_at
         from webhook_endpoint_changes order by changed_at desc limit ${limit})
        union all
        -- A passkey's approval names the person: the operator the policy authority enrolled it for.
        (select 'passkey_approval', subject, op, null, shown::text,
                'approved by ' || operator || ' with passkey ' || key_id, 'console', operator, key_id,
                approved_at
         from passkey_approvals order by approved_at desc limit ${limit})
        union all
        -- A passkey's revocation: whose passkey (the subject's operator is in the after), why, and
        -- who revoked it (a session's operator; null under the tokens or the CLI).
        (select 'passkey_revocation', key_id, 'revoke',
                case when enrolled_at is null then 'pending' else 'enrolled' end,
                'revoked (' || operator || '''s passkey)', revoked_reason, revoked_source,
                revoked_by, revoked_by_key_id, revoked_at
         from operator_passkeys where revoked_at is not null order by revoked_at desc limit ${limit})
        order by at desc limit ${limit}`,
  );
  return {
    note: AUDIT_NOTE,
    changes: rows.map((row) => ({
      ...row,
      // registration_policy_changes keeps the column's key; the console speaks the wire names.
      subject:
        row.kind === "registration_setting" ? (SETTING_NAMES.get(row.subject) ?? row.subject) : row.subject,
      at: iso(row.at),
    })),
  };
}
