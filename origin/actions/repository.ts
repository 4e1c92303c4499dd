/**
 * Agent actions (SPEC "Agent action", DESIGN §4): the audit and idempotency record of every
 * faucet payout, transfer and x402 authorization, written before anything is signed.
 */
import { createHash } from "node:crypto";
import { and, eq, sql } from "drizzle-orm";
import type { ActionStatus } from "../../shared/gateway-schemas.ts";
import { type Db, queryRows, toDate } from "../db/client.ts";
import { agentActions } from "../db/schema.ts";

export type ActionKind = "faucet" | "transfer" | "x402";

export type ActionRow = {
  actionId: string;
  agentId: string;
  kind: ActionKind;
  idempotencyKey: string;
  requestHash: string;
  status: ActionStatus;
  amountUnits: bigint | null;
  toAddress: string | null;
  txHash: string | null;
  txId: string | null;
  feeWei: bigint | null;
  signedPayload: unknown;
  errorCode: string | null;
  errorMessage: string | null;
  createdAt: Date;
  updatedAt: Date;
};

/**
 * SHA-256 of the canonical request: keys sorted, values as given. The idempotency key is not part
 * of it (it names the request; the hash says what was asked).
 */
export function requestHash(kind: ActionKind, payload: Record<string, string | null>): string {
  const canonical = JSON.stringify([kind, Object.entries(payload).sort(([a], [b]) => (a < b ? -1 : 1))]);
  return createHash("sha256").update(canonical).digest("hex");
}

export type ClaimActionParams = {
  agentId: string;
  kind: ActionKind;
  idempotencyKey: string;
  requestHash: string;
  amountUnits: bigint | null;
  toAddress: string | null;
};

export type ClaimResult =
  | { claimed: true; action: ActionRow }
  | { claimed: false; action: ActionRow; samePayload: boolean };

/**
 * Records a `requested` action, or finds the one already recorded under the same (agent, kind,
 * key). A concurrent insert of the same key waits for the first to commit, then finds it: of any
 * number of duplicates exactly one claims.
 */
export async function claimAction(db: Db, params: ClaimActionParams): Promise<ClaimResult> {
  const inserted = await db
    .insert(agentActions)
    .values({
      agentId: params.agentId,
      kind: params.kind,
      idempotencyKey: params.idempotencyKey,
      requestHash: params.requestHash,
      amountUnits: params.amountUnits?.toString() ?? null,
      toAddress: params.toAddress,
    })
    .onConflictDoNothing({ target: [agentActions.agentId, agentActions.kind, agentActions.idempotencyKey] })
    .returning({ actionId: agentActions.actionId });
  if (inserted[0])
    return { claimed: true, action: (await findAction(db, params.agentId, inserted[0].actionId))! };
  const [existing] = await selectActions(
    db,
    sql`a.agent_id = ${params.agentId} and a.kind = ${params.kind} and a.idempotency_key = ${params.idempotencyKey}`,
  );
  if (!existing) throw new Error("action conflict without a row"); // a bug: the insert saw one
  return { claimed: false, action: existing, samePayload: existing.requestHash === params.requestHash };
}

/** The caller's own action (another agent's id reads as not found), with its transaction's fee. */
export async function findAction(db: Db, agentId: string, actionId: string): Promise<ActionRow | undefined> {
  const [row] = await selectActions(db, sql`a.action_id = ${actionId} and a.agent_id = ${agentId}`);
  return row;
}

/**
 * Locks a `requested` action for its executor. Undefined when it is no longer requested, or when
 * another request or the tracker is executing it right now (it is then in flight, not ours).
 */
export async function lockRequested(tx: Db, actionId: string): Promise<boolean> {
  const rows = await queryRows<{ action_id: string }>(
    tx,
    sql`select action_id from agent_actions where action_id = ${actionId} and status = 'requested'
        for update skip locked`,
  );
  return rows.length === 1;
}

/** Ends an action that was never signed: a refusal, or a signer that will not sign it. */
export async function markFailed(tx: Db, actionId: string, code: string, message: string): Promise<void> {
  await tx
    .update(agentActions)
    .set({ status: "failed", errorCode: code, errorMessage: message, updatedAt: sql`now()` })
    .where(and(eq(agentActions.actionId, actionId), eq(agentActions.status, "requested")));
}

/** Notes a transient failure on a requested action, which stays requested for a retry. */
export async function noteRetryable(db: Db, actionId: string, code: string, message: string): Promise<void> {
  await db
    .update(agentActions)
    .set({ errorCode: code, errorMessage: message, updatedAt: sql`now()` })
    .where(and(eq(agentActions.actionId, actionId), eq(agentActions.status, "requested")));
}

/**
 * Units the agent's transfers signed since `since` count against its daily limit: value plus the
 * maximum fee, as the enclave counts them (DESIGN §5), whatever became of them on chain.
 */
export async function transferCostSince(tx: Db, agentId: string, since: Date): Promise<bigint> {
  const [row] = await queryRows<{ total: string | null }>(
    tx,
    sql`select sum(cost_units)::text as total from agent_actions
        where agent_id = ${agentId} and kind = 'transfer' and signed_at >= ${since.toISOString()}`,
  );
  return BigInt(row?.total ?? "0");
}

/** The agent's faucet payouts: the total signed since `since`, and when the latest was signed. */
export async function faucetPayouts(
  tx: Db,
  agentId: string,
  since: Date,
): Promise<{ totalSinceUnits: bigint; lastSignedAt: Date | null }> {
  const [row] = await queryRows<{ total: string | null; last: Date | string | null }>(
    tx,
    sql`select (sum(amount_units) filter (where signed_at >= ${since.toISOString()}))::text as total,
          max(signed_at) as last
        from agent_actions where agent_id = ${agentId} and kind = 'faucet' and signed_at is not null`,
  );
  return { totalSinceUnits: BigInt(row?.total ?? "0"), lastSignedAt: row?.last ? toDate(row.last) : null };
}

async function selectActions(db: Db, where: ReturnType<typeof sql>): Promise<ActionRow[]> {
  const rows = await queryRows<{
    action_id: string;
    agent_id: string;
    kind: ActionKind;
    idempotency_key: string;
    request_hash: string;
    status: ActionStatus;
    amount_units: string | null;
    to_address: string | null;
    tx_hash: string | null;
    tx_id: string | null;
    fee_wei: string | null;
    signed_payload: unknown;
    error_code: string | null;
    error_message: string | null;
    created_at: Date | string;
    updated_at: Date | string;
  }>(
    db,
    sql`select a.action_id, a.agent_id, a.kind, a.idempotency_key, a.request_hash, a.status,
          a.amount_units::text, a.to_address, a.tx_hash, a.tx_id, t.fee_wei::text, a.signed_payload,
          coalesce(a.error_code, case when a.status = 'reverted' then 'reverted' end) as error_code,
          a.error_message, a.created_at, a.updated_at
        from agent_actions a left join outgoing_transactions t on t.tx_id = a.tx_id
        where ${where}`,
  );
  return rows.map((row) => ({
    actionId: row.action_id,
    agentId: row.agent_id,
    kind: row.kind,
    idempotencyKey: row.idempotency_key,
    requestHash: row.request_hash,
    status: row.status,
    amountUnits: row.amount_units === null ? null : BigInt(row.amount_units),
    toAddress: row.to_address,
    txHash: row.tx_hash,
    txId: row.tx_id,
    feeWei: row.fee_wei === null ? null : BigInt(row.fee_wei),
    signedPayload: row.signed_payload,
    errorCode: row.error_code,
    errorMessage: row.error_message,
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
  }));
}
