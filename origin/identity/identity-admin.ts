import { desc, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client.ts";
import { agentIdentities } from "../db/schema.ts";

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

export type IdentityChange =
  | { ok: true; changed: boolean }
  | { ok: false; error: "not_found" | "reason_required" };

/**
 * SPEC "Identity disable by operator": reversible, applies at the next request, moves no funds.
 * Enabling clears the reason; it does not undo a revocation.
 */
export async function setIdentityEnabled(
  db: Db,
  params: { agentId: string; enabled: boolean; reason: string },
): Promise<IdentityChange> {
  if (!params.enabled && params.reason.trim() === "") return { ok: false, error: "reason_required" };
  const [before] = await db
    .select({ enabled: agentIdentities.enabled })
    .from(agentIdentities)
    .where(eq(agentIdentities.agentId, params.agentId));
  if (!before) return { ok: false, error: "not_found" };
  if (before.enabled === params.enabled) return { ok: true, changed: false };
  await db
    .update(agentIdentities)
    .set(
      params.enabled
        ? { enabled: true, disabledReason: null, disabledAt: null }
        : { enabled: false, disabledReason: `operator: ${params.reason.trim()}`, disabledAt: sql`now()` },
    )
    .where(eq(agentIdentities.agentId, params.agentId));
  return { ok: true, changed: true };
}

/** Revocation is final: the token stops at the next request and no command restores it. */
export async function revokeIdentity(db: Db, agentId: string): Promise<IdentityChange> {
  const updated = await db
    .update(agentIdentities)
    .set({ revoked: true, revokedAt: sql`coalesce(${agentIdentities.revokedAt}, now())` })
    .where(eq(agentIdentities.agentId, agentId))
    .returning({ agentId: agentIdentities.agentId });
  return updated.length === 1 ? { ok: true, changed: true } : { ok: false, error: "not_found" };
}
