/**
 * `approved_non_zero` exceptions (docs/api.md, "The funding gate"): an operator grants a wallet a
 * pre-restore ceiling for a limited time, with a reason; every grant and revocation records before,
 * after and the reason. An expired exception is the same as none.
 */
import { and, desc, eq, gt, isNull, sql } from "drizzle-orm";
import { err, ok, type Result } from "../../shared/result.ts";
import type { Db } from "../db/client.ts";
import { fundingExceptionChanges, fundingExceptions } from "../db/schema.ts";

export type FundingException = {
  id: string;
  wallet: string;
  ceilingUnits: bigint;
  reason: string;
  approvedAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
  active: boolean;
};

export type GrantParams = { wallet: string; ceilingUnits: bigint; expiresAt: Date; reason: string };

export type ExceptionRefusal = { code: "not_found" | "already_revoked" | "invalid"; message: string };

export type ExceptionResult = Result<FundingException, ExceptionRefusal>;

/** Grants a ceiling to a wallet until `expiresAt`. */
export async function grantException(
  db: Db,
  params: GrantParams,
  now = new Date(),
): Promise<ExceptionResult> {
  const reason = params.reason.trim();
  if (reason === "") return err({ code: "invalid", message: "a reason is required" });
  if (params.expiresAt <= now) return err({ code: "invalid", message: "the expiry must be in the future" });
  if (params.ceilingUnits < 0n) return err({ code: "invalid", message: "the ceiling must not be negative" });
  return db.transaction(async (tx): Promise<ExceptionResult> => {
    const [row] = await tx
      .insert(fundingExceptions)
      .values({
        wallet: params.wallet.toLowerCase(),
        ceilingUnits: params.ceilingUnits.toString(),
        reason,
        expiresAt: params.expiresAt,
      })
      .returning();
    const exception = toException(row!, now);
    await tx.insert(fundingExceptionChanges).values({
      exceptionId: exception.id,
      change: "grant",
      before: null,
      after: snapshot(exception),
      reason,
    });
    return ok(exception);
  });
}

/** Revokes an exception now; its before and after are recorded with the reason. */
export async function revokeException(
  db: Db,
  params: { id: string; reason: string },
  now = new Date(),
): Promise<ExceptionResult> {
  const reason = params.reason.trim();
  if (reason === "") return err({ code: "invalid", message: "a reason is required" });
  return db.transaction(async (tx): Promise<ExceptionResult> => {
    const [current] = await tx
      .select()
      .from(fundingExceptions)
      .where(eq(fundingExceptions.id, params.id))
      .for("update");
    if (!current) return err({ code: "not_found", message: `no funding exception ${params.id}` });
    if (current.revokedAt) return err({ code: "already_revoked", message: "already revoked" });
    const before = toException(current, now);
    const [updated] = await tx
      .update(fundingExceptions)
      .set({ revokedAt: sql`now()` })
      .where(eq(fundingExceptions.id, params.id))
      .returning();
    const exception = toException(updated!, now);
    await tx.insert(fundingExceptionChanges).values({
      exceptionId: exception.id,
      change: "revoke",
      before: snapshot(before),
      after: snapshot(exception),
      reason,
    });
    return ok(exception);
  });
}

/**
 * Exceptions, newest first; only active ones unless `all` (then the newest 1000). The active are
 * chosen by the query, not from the newest rows: an active exception behind many newer ended ones
 * must still be listed, its id being what a revocation needs.
 */
export async function listExceptions(
  db: Db,
  options: { all?: boolean } = {},
  now = new Date(),
): Promise<FundingException[]> {
  const rows = await db
    .select()
    .from(fundingExceptions)
    .where(
      options.all
        ? undefined
        : and(isNull(fundingExceptions.revokedAt), gt(fundingExceptions.expiresAt, now)),
    )
    .orderBy(desc(fundingExceptions.approvedAt))
    .limit(options.all ? 1000 : ACTIVE_LIST_LIMIT);
  return rows.map((row) => toException(row, now));
}

/** Far above what a node grants at once: every active exception is listed. */
const ACTIVE_LIST_LIMIT = 100_000;

type Row = typeof fundingExceptions.$inferSelect;

function toException(row: Row, now: Date): FundingException {
  return {
    id: row.id,
    wallet: row.wallet,
    ceilingUnits: BigInt(row.ceilingUnits),
    reason: row.reason,
    approvedAt: row.approvedAt,
    expiresAt: row.expiresAt,
    revokedAt: row.revokedAt,
    active: row.revokedAt === null && row.expiresAt > now,
  };
}

function snapshot(exception: FundingException): Record<string, string | null> {
  return {
    wallet: exception.wallet,
    mode: "approved_non_zero",
    ceiling_units: exception.ceilingUnits.toString(),
    expires_at: exception.expiresAt.toISOString(),
    revoked_at: exception.revokedAt?.toISOString() ?? null,
  };
}
