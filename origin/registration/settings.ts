import { sql } from "drizzle-orm";
import type { Operator } from "../../shared/operator.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { type Db, queryRows } from "../db/client.ts";
import {
  type ChangeSource,
  getRegistrationPolicy,
  type PolicySetting,
  type RegistrationPolicy,
  updateRegistrationPolicy,
} from "./policy-repository.ts";
import { ALL_GROUPS } from "./quota-gate.ts";

/**
 * The registration settings service: what `npm run registration` calls now and the operator
 * console will call later (docs/operations.md#the-operator-console-and-metrics: unknown settings,
 * invalid ranges and empty reasons are rejected; every change records before, after and reason).
 * Names are snake_case, as on the wire.
 */

type SettingRule =
  | { key: PolicySetting; kind: "boolean" }
  | { key: PolicySetting; kind: "integer"; max: number };

/** Every setting and its range: integers from 0 to a bound well above any sane value. */
export const REGISTRATION_SETTINGS = {
  paused: { key: "paused", kind: "boolean" },
  per_ip_daily: { key: "perIpDaily", kind: "integer", max: 100_000 },
  network_daily: { key: "networkDaily", kind: "integer", max: 10_000_000 },
  total_ceiling: { key: "totalCeiling", kind: "integer", max: 100_000_000 },
  key_reserve: { key: "keyReserve", kind: "integer", max: 1_000_000 },
  attempts_per_ip_per_minute: { key: "attemptsPerIpPerMinute", kind: "integer", max: 100_000 },
  attempts_global_per_minute: { key: "attemptsGlobalPerMinute", kind: "integer", max: 10_000_000 },
} as const satisfies Record<string, SettingRule>;

export type SettingName = keyof typeof REGISTRATION_SETTINGS;

export type SettingsRefusal =
  | { code: "unknown_setting"; setting: string }
  | { code: "invalid_value"; setting: SettingName; message: string }
  | { code: "empty_reason" }
  | { code: "no_change_requested" };

export type SettingsView = Record<SettingName, boolean | number>;

export type SettingChange = { setting: SettingName; before: string; after: string };

export type ChangeSettingsResult = Result<{ after: SettingsView; changed: SettingChange[] }, SettingsRefusal>;

const NAMES = Object.keys(REGISTRATION_SETTINGS) as SettingName[];

export function settingsView(policy: RegistrationPolicy): SettingsView {
  return Object.fromEntries(
    NAMES.map((name) => [name, policy[REGISTRATION_SETTINGS[name].key]]),
  ) as SettingsView;
}

/**
 * Parses one value: a boolean (`true`/`false`, or the JSON boolean) for `paused`, otherwise a whole
 * number in the setting's range (digits, or a JSON integer).
 */
export function parseSettingValue(
  name: string,
  value: unknown,
): Result<{ name: SettingName; value: boolean | number }, SettingsRefusal> {
  if (!Object.hasOwn(REGISTRATION_SETTINGS, name)) return err({ code: "unknown_setting", setting: name });
  const setting = name as SettingName;
  const rule: SettingRule = REGISTRATION_SETTINGS[setting];
  if (rule.kind === "boolean") {
    if (value === true || value === "true") return ok({ name: setting, value: true });
    if (value === false || value === "false") return ok({ name: setting, value: false });
    return err({ code: "invalid_value", setting, message: "must be true or false" });
  }
  const number = typeof value === "string" && /^\d{1,12}$/.test(value) ? Number(value) : value;
  if (typeof number !== "number" || !Number.isInteger(number) || number < 0 || number > rule.max) {
    return err({ code: "invalid_value", setting, message: `must be a whole number from 0 to ${rule.max}` });
  }
  return ok({ name: setting, value: number });
}

export type ChangeSettingsParams = {
  /** Setting name → value, as the operator sent them; every one is checked before anything changes. */
  changes: Record<string, unknown>;
  reason: string;
  /** Recorded with each change, so the audit shows whether the console or the CLI made it. */
  source: ChangeSource;
  /**
   * The operator signed in with a passkey who made the change (docs/operations.md#signing-in-with-a-passkey);
   * null or absent for the shared admin tokens and the CLI.
   */
  operator?: Operator | null;
};

/**
 * Applies every change or none, with the before value, the after value and the reason recorded.
 * A setting set to the value it has is no change and is not recorded.
 */
export async function changeRegistrationSettings(
  db: Db,
  params: ChangeSettingsParams,
): Promise<ChangeSettingsResult> {
  if (params.reason.trim() === "") return err({ code: "empty_reason" });
  const entries = Object.entries(params.changes);
  if (entries.length === 0) return err({ code: "no_change_requested" });
  const changes: Partial<Record<PolicySetting, boolean | number>> = {};
  for (const [name, value] of entries) {
    const parsed = parseSettingValue(name, value);
    if (!parsed.ok) return parsed;
    changes[REGISTRATION_SETTINGS[parsed.value.name].key] = parsed.value.value;
  }
  // The before values come from the update itself, read under the policy row's lock.
  const result = await updateRegistrationPolicy(db, {
    changes: changes as Parameters<typeof updateRegistrationPolicy>[1]["changes"],
    reason: params.reason,
    source: params.source,
    operator: params.operator ?? null,
  });
  const byKey = new Map(NAMES.map((name) => [REGISTRATION_SETTINGS[name].key as string, name]));
  return ok({
    after: settingsView(result.policy),
    changed: result.changed.map((change) => ({
      setting: byKey.get(change.setting)!,
      before: change.before,
      after: change.after,
    })),
  });
}

export type RegistrationStatus = {
  settings: SettingsView;
  updated_at: string;
  /** Free verified keys, and how many of them public registration may still take. */
  free_keys: number;
  issuable_before_reserve: number;
  issued_total: number;
  issued_today: number;
  attempts_this_minute: number;
  recent_changes: { setting: string; before: string; after: string; reason: string; changed_at: string }[];
};

/**
 * Settings and counters, read only: reading changes no counter
 * (docs/api.md#registration-quotas-and-counters).
 */
export async function readRegistrationStatus(db: Db, now: Date): Promise<RegistrationStatus> {
  const policy = await getRegistrationPolicy(db);
  const minute = new Date(Math.floor(now.getTime() / 60_000) * 60_000).toISOString();
  const [counts] = await queryRows<{
    free_keys: number;
    issued_total: number;
    issued_today: number;
    attempts: number;
  }>(
    db,
    sql`select
          (select count(*)::int from key_pool where status = 'free') as free_keys,
          (select count(*)::int from registration_issued) as issued_total,
          coalesce((select count from registration_admissions
                    where day = ${now.toISOString().slice(0, 10)} and ip_group = ${ALL_GROUPS}), 0) as issued_today,
          coalesce((select count from registration_attempts
                    where minute = ${minute} and ip_group = ${ALL_GROUPS}), 0) as attempts`,
  );
  const changes = await queryRows<{
    setting: string;
    before_value: string;
    after_value: string;
    reason: string;
    changed_at: Date;
  }>(
    db,
    sql`select setting, before_value, after_value, reason, changed_at
        from registration_policy_changes order by changed_at desc limit 10`,
  );
  const byKey = new Map(NAMES.map((name) => [REGISTRATION_SETTINGS[name].key as string, name]));
  return {
    settings: settingsView(policy),
    updated_at: policy.updatedAt.toISOString(),
    free_keys: counts!.free_keys,
    issuable_before_reserve: Math.max(0, counts!.free_keys - policy.keyReserve),
    issued_total: counts!.issued_total,
    issued_today: counts!.issued_today,
    attempts_this_minute: counts!.attempts,
    recent_changes: changes.map((change) => ({
      setting: byKey.get(change.setting) ?? change.setting,
      before: change.before_value,
      after: change.after_value,
      reason: change.reason,
      changed_at: new Date(change.changed_at).toISOString(),
    })),
  };
}
