import { eq, sql } from "drizzle-orm";
import type { Operator } from "../../shared/operator.ts";
import type { Db } from "../db/client.ts";
import { registrationPolicy, registrationPolicyChanges } from "../db/schema.ts";

export type RegistrationPolicy = {
  paused: boolean;
  perIpDaily: number;
  networkDaily: number;
  totalCeiling: number;
  keyReserve: number;
  attemptsPerIpPerMinute: number;
  attemptsGlobalPerMinute: number;
  updatedAt: Date;
};

export type PolicySetting = Exclude<keyof RegistrationPolicy, "updatedAt">;

export const POLICY_SETTINGS: readonly PolicySetting[] = [
  "paused",
  "perIpDaily",
  "networkDaily",
  "totalCeiling",
  "keyReserve",
  "attemptsPerIpPerMinute",
  "attemptsGlobalPerMinute",
];

export async function getRegistrationPolicy(db: Db): Promise<RegistrationPolicy> {
  const [row] = await db.select().from(registrationPolicy).where(eq(registrationPolicy.id, 1));
  if (!row) throw new Error("registration_policy row is missing: run the migrations");
  const { id: _id, ...policy } = row;
  return policy;
}

/** The channel a change came through; who, when known, is the change's `operator`. */
export type ChangeSource = "console" | "cli";

export type UpdateRegistrationPolicyParams = {
  changes: Partial<Omit<RegistrationPolicy, "updatedAt">>;
  reason: string;
  /** Unset only for setup that writes the policy directly (tests, benches): recorded as unknown. */
  source?: ChangeSource;
  /**
   * The operator signed in with a passkey who made the change (docs/operations.md#signing-in-with-a-passkey);
   * null or absent for the shared admin tokens and the CLI.
   */
  operator?: Operator | null;
};

export type PolicyChange = { setting: PolicySetting; before: string; after: string };

/**
 * Applies setting changes and records, per changed setting, the before value, the after value and
 * the reason, in one transaction under the row lock (docs/api.md#registration-quotas-and-counters).
 * Settings whose value does not change are not recorded.
 */
export async function updateRegistrationPolicy(
  db: Db,
  params: UpdateRegistrationPolicyParams,
): Promise<{ policy: RegistrationPolicy; changed: PolicyChange[] }> {
  if (params.reason.trim() === "") throw new Error("a reason is required");
  return db.transaction(async (tx) => {
    await tx.execute(sql`select 1 from registration_policy where id = 1 for update`);
    const before = await getRegistrationPolicy(tx);
    const changed: PolicyChange[] = [];
    for (const setting of POLICY_SETTINGS) {
      const after = params.changes[setting];
      if (after === undefined || after === before[setting]) continue;
      changed.push({ setting, before: String(before[setting]), after: String(after) });
    }
    if (changed.length === 0) return { policy: before, changed };
    await tx
      .update(registrationPolicy)
      .set({ ...params.changes, updatedAt: sql`now()` })
      .where(eq(registrationPolicy.id, 1));
    await tx.insert(registrationPolicyChanges).values(
      changed.map((change) => ({
        setting: change.setting,
        beforeValue: change.before,
        afterValue: change.after,
        reason: params.reason,
        source: params.source ?? null,
        operator: params.operator?.name ?? null,
        passkeyKeyId: params.operator?.keyId ?? null,
        // now() is the transaction's start; the change happens after the lock is granted.
        changedAt: sql`clock_timestamp()`,
      })),
    );
    return { policy: await getRegistrationPolicy(tx), changed };
  });
}
