import { and, asc, eq, isNull, or, sql } from "drizzle-orm";
import { CHAIN_ID } from "../../shared/constants.ts";
import { errorMessage } from "../../shared/error-message.ts";
import { type Db, queryRows } from "../db/client.ts";
import { agentIdentities, identityFindings } from "../db/schema.ts";
import type { Logger } from "../logger.ts";
import { type IdentitySigner, type ProofOutcome, proveIdentity } from "./prove.ts";

export type SweepDeps = {
  db: Db;
  signer: IdentitySigner;
  logger: Logger;
  /**
   * Runs `work` on the connection that holds the sweep's lock through a tick: the origin gives one
   * of its own, outside the pool (DatabaseHandle.unbounded), so a tick never needs two of the
   * pool's connections at once; the pool's own otherwise.
   */
  lockConnection?: <T>(work: (db: Db) => Promise<T>) => Promise<T>;
};

export type SweepParams = {
  envId: string;
  windowSeconds: number;
  /** At most this many identities per tick, those whose last attempt is oldest first. */
  limit?: number;
  chainId?: number;
};

export type SweepReport = { checked: number; verified: number; disabled: number; findings: number };

/** The advisory lock key of the identity sweep ("swep" in ASCII), one per database. */
const SWEEP_LOCK = 0x73776570;

const NOTHING_SWEPT: SweepReport = { checked: 0, verified: 0, disabled: 0, findings: 0 };

/**
 * Re-proves every enabled identity whose last verification is older than the window
 * (docs/api.md#identities-keys-and-the-sweep), whichever origin made it. Only `destructive` changes
 * state (disables, once); every other class records a finding and leaves the wallet intact, to be
 * retried next tick. One sweep at a time in the database (a transaction-scoped advisory lock,
 * held through the tick: another origin's tick skips its turn), so two origins never prove the
 * same identity twice over nor record its finding twice; an origin that stops releases it.
 */
export async function sweepIdentities(deps: SweepDeps, params: SweepParams): Promise<SweepReport> {
  const onLockConnection = deps.lockConnection ?? ((work) => work(deps.db));
  return onLockConnection((lockDb) =>
    lockDb.transaction(async (tx) => {
      const [lock] = await queryRows<{ locked: boolean }>(
        tx as unknown as Db,
        sql`select pg_try_advisory_xact_lock(${SWEEP_LOCK}) as locked`,
      );
      // The tick's reads and writes go through the pool, each committed as it is made: the lock's
      // transaction holds no row, so an operator's change to an identity never waits for a tick.
      return lock?.locked ? sweepDue(deps, params) : NOTHING_SWEPT;
    }),
  );
}

async function sweepDue(deps: SweepDeps, params: SweepParams): Promise<SweepReport> {
  const due = await deps.db
    .select({
      agentId: agentIdentities.agentId,
      keyRef: agentIdentities.agentTransferKeyRef,
      assignedWallet: agentIdentities.assignedWallet,
    })
    .from(agentIdentities)
    .where(
      and(
        eq(agentIdentities.enabled, true),
        // Older than the window by the database's clock, which stamps each proof (applyOutcome):
        // against the origin's, a host five minutes ahead would find every identity proved within
        // the last five minutes due again, and prove it at every tick.
        or(
          isNull(agentIdentities.lastVerifiedAt),
          sql`${agentIdentities.lastVerifiedAt} < clock_timestamp() - make_interval(secs => ${params.windowSeconds})`,
        ),
      ),
    )
    // By the last attempt, a verification or a finding (identity_findings_agent_idx): ordered by
    // the last verification alone, identities that keep failing without being disabled came first
    // every tick, and as many as a tick takes would keep the rest from ever being proved again.
    .orderBy(
      sql`greatest(${agentIdentities.lastVerifiedAt},
        (select max(${identityFindings.at}) from ${identityFindings}
          where ${identityFindings.agentId} = ${agentIdentities.agentId})) asc nulls first`,
      asc(agentIdentities.createdAt),
    )
    .limit(params.limit ?? 500);

  const report: SweepReport = { ...NOTHING_SWEPT };
  for (const identity of due) {
    const outcome = await proveIdentity(
      deps.signer,
      { keyRef: identity.keyRef, assignedWallet: identity.assignedWallet as `0x${string}` },
      { chainId: params.chainId ?? CHAIN_ID, envId: params.envId },
    ).catch(unexpected);
    report.checked++;
    const applied = await applyOutcome(deps.db, identity.agentId, outcome);
    if (outcome.verified) report.verified++;
    else {
      report.findings++;
      if (applied === "disabled") report.disabled++;
      deps.logger.warn(
        { agent_id: identity.agentId, class: outcome.class, code: outcome.code },
        "identity finding",
      );
    }
  }
  return report;
}

/**
 * An unexpected raise or throw is a `terminal_unknown` finding with the wallet intact, for this
 * identity alone: the rest of the tick goes on (docs/api.md#identities-keys-and-the-sweep). The
 * message is kept; no stack, which could carry request data.
 */
function unexpected(error: unknown): ProofOutcome {
  const message = errorMessage(error);
  return {
    verified: false,
    class: "terminal_unknown",
    code: "unexpected_error",
    detail: message.slice(0, 500),
  };
}

/** Writes what one outcome means; a destructive repeat on a disabled identity changes nothing. */
export async function applyOutcome(
  db: Db,
  agentId: string,
  outcome: ProofOutcome,
): Promise<"verified" | "disabled" | "already_disabled" | "finding"> {
  if (outcome.verified) {
    await db
      .update(agentIdentities)
      .set({ lastVerifiedAt: sql`now()` })
      .where(eq(agentIdentities.agentId, agentId));
    return "verified";
  }
  return db.transaction(async (tx) => {
    if (outcome.class === "destructive") {
      const disabled = await tx
        .update(agentIdentities)
        .set({ enabled: false, disabledReason: `identity proof: ${outcome.code}`, disabledAt: sql`now()` })
        .where(and(eq(agentIdentities.agentId, agentId), eq(agentIdentities.enabled, true)))
        .returning({ agentId: agentIdentities.agentId });
      if (disabled.length === 0) return "already_disabled";
      await tx
        .insert(identityFindings)
        .values({ agentId, class: outcome.class, code: outcome.code, detail: outcome.detail });
      return "disabled";
    }
    await tx
      .insert(identityFindings)
      .values({ agentId, class: outcome.class, code: outcome.code, detail: outcome.detail });
    return "finding";
  });
}
