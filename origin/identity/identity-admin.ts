import { desc, eq, sql } from "drizzle-orm";
import type { PgUpdateSetSource } from "drizzle-orm/pg-core";
import type { Operator } from "../../shared/operator.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import type { Db } from "../db/client.ts";
import { agentIdentities, identityChanges } from "../db/schema.ts";

export type IdentitySummary = {
  agentId: string;
  assignedWallet: string;
  capabilities: string[];
  enabled: boolean;
  revoked: boolean;
  origin: string;
  createdAt: Date;
  lastVerifiedAt: Date | null;
  disabledReason: string | null;
};

export async function listIdentities(db: Db, limit = 1000): Promise<IdentitySummary[]> {
  return db
    .select({
      agentId: agentIdentities.agentId,
      assignedWallet: agentIdentities.assignedWallet,
      capabilities: agentIdentities.capabilities,
      enabled: agentIdentities.enabled,
      revoked: agentIdentities.revoked,
      origin: agentIdentities.origin,
      createdAt: agentIdentities.createdAt,
      lastVerifiedAt: agentIdentities.lastVerifiedAt,
      disabledReason: agentIdentities.disabledReason,
    })
    .from(agentIdentities)
    .orderBy(desc(agentIdentities.createdAt))
    .limit(limit);
}

/** Where an operator change came from: a channel; who, when known, is the change's `operator`. */
export type IdentityChangeSource = "console" | "cli";

export type SetIdentityEnabledParams = {
  agentId: string;
  enabled: boolean;
  reason: string;
  source: IdentityChangeSource;
  /**
   * The operator signed in with a passkey who made the change (docs/operations.md#signing-in-with-a-passkey);
   * null or absent for the shared admin tokens and the CLI.
   */
  operator?: Operator | null;
};

export type SetIdentityEnabledResult = Result<
  { changed: boolean; before: { enabled: boolean }; after: { enabled: boolean }; revoked: boolean },
  "not_found" | "reason_required"
>;

/**
 * An operator's disable (docs/operations.md#the-operator-console-and-metrics) is reversible,
 * applies at the next request (bearer auth reads the identity on every request), moves no funds and
 * leaves submitted transactions alone (nothing here touches actions or transactions). Either way a
 * reason is required, and a change is recorded in identity_changes with its before and after, in
 * the transaction that makes it, under the identity's row lock: concurrent changes serialize and
 * every record's before is the state it found. Setting the state the identity already has changes
 * and records nothing. Enabling clears the disable reason; it does not undo a revocation.
 */
export async function setIdentityEnabled(
  db: Db,
  params: SetIdentityEnabledParams,
): Promise<SetIdentityEnabledResult> {
  return changeIdentity(db, params, (before, reason) => ({
    change: params.enabled ? "enable" : "disable",
    changes: before.enabled !== params.enabled,
    afterEnabled: params.enabled,
    revoked: before.revoked,
    set: params.enabled
      ? { enabled: true, disabledReason: null, disabledAt: null }
      : { enabled: false, disabledReason: `operator: ${reason}`, disabledAt: sql`now()` },
  }));
}

export type RevokeIdentityParams = {
  agentId: string;
  reason: string;
  source: IdentityChangeSource;
  /**
   * The operator signed in with a passkey who made the change (docs/operations.md#signing-in-with-a-passkey);
   * null or absent for the shared admin tokens and the CLI.
   */
  operator?: Operator | null;
};

/** The same shape as an enable or disable: a revocation leaves the enabled flag as it was. */
export type RevokeIdentityResult = SetIdentityEnabledResult;

/**
 * Revocation is final (docs/operations.md#the-operator-console-and-metrics): the token stops at the
 * next request (bearer auth reads the identity on every request) and no command restores it. Like
 * a disable it needs a reason and is recorded in identity_changes in the transaction that makes it,
 * under the identity's row lock; revoking a revoked identity changes and records nothing.
 */
export async function revokeIdentity(db: Db, params: RevokeIdentityParams): Promise<RevokeIdentityResult> {
  return changeIdentity(db, params, (before) => ({
    change: "revoke",
    changes: !before.revoked,
    afterEnabled: before.enabled,
    revoked: true,
    set: { revoked: true, revokedAt: sql`now()` },
  }));
}

/** What an operator's change does to the identity it found (changeIdentity). */
type PlannedChange = {
  change: "enable" | "disable" | "revoke";
  /** False: the identity is already so; nothing is written or recorded. */
  changes: boolean;
  afterEnabled: boolean;
  revoked: boolean;
  set: PgUpdateSetSource<typeof agentIdentities>;
};

/**
 * An operator's change of an identity, with a reason: planned from the identity as its row lock
 * finds it, made and recorded in identity_changes in one transaction, so concurrent changes
 * serialize and every record's before is the state it found.
 */
async function changeIdentity(
  db: Db,
  params: { agentId: string; reason: string; source: IdentityChangeSource; operator?: Operator | null },
  plan: (before: { enabled: boolean; revoked: boolean }, reason: string) => PlannedChange,
): Promise<SetIdentityEnabledResult> {
  const reason = params.reason.trim();
  if (reason === "") return err("reason_required");
  return db.transaction(async (tx): Promise<SetIdentityEnabledResult> => {
    const [before] = await tx
      .select({ enabled: agentIdentities.enabled, revoked: agentIdentities.revoked })
      .from(agentIdentities)
      .where(eq(agentIdentities.agentId, params.agentId))
      .for("update");
    if (!before) return err("not_found");
    const planned = plan(before, reason);
    const value = {
      changed: planned.changes,
      before: { enabled: before.enabled },
      after: { enabled: planned.afterEnabled },
      revoked: planned.revoked,
    };
    if (!planned.changes) return ok(value);
    await tx.update(agentIdentities).set(planned.set).where(eq(agentIdentities.agentId, params.agentId));
    await tx.insert(identityChanges).values({
      agentId: params.agentId,
      change: planned.change,
      beforeEnabled: before.enabled,
      afterEnabled: planned.afterEnabled,
      reason,
      source: params.source,
      operator: params.operator?.name ?? null,
      passkeyKeyId: params.operator?.keyId ?? null,
      // now() is the transaction's start; the change happens once the row lock is granted.
      changedAt: sql`clock_timestamp()`,
    });
    return ok(value);
  });
}
