/**
 * Agent actions (SPEC "Agent action", DESIGN §4): the audit and idempotency record of every
 * faucet payout, transfer and x402 authorization, written before anything is signed.
 */
import { createHash } from "node:crypto";
import { and, eq, type SQL, sql } from "drizzle-orm";
import type { ActionStatus } from "../../shared/gateway-schemas.ts";
import { nextNonceUpsert } from "../chain/outgoing.ts";
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
    .returning({
      actionId: agentActions.actionId,
      createdAt: agentActions.createdAt,
      updatedAt: agentActions.updatedAt,
    });
  const row = inserted[0];
  if (row) {
    const action: ActionRow = {
      ...params,
      actionId: row.actionId,
      status: "requested",
      txHash: null,
      txId: null,
      feeWei: null,
      signedPayload: null,
      errorCode: null,
      errorMessage: null,
      createdAt: row.createdAt,
      updatedAt: row.updatedAt,
    };
    return { claimed: true, action };
  }
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
 * Locks a `requested` action for its executor and, in the same statement, its sender's nonce row
 * (chain/outgoing.ts nextNonceUpsert says why that row). `nextNonce` is undefined when the action is
 * no longer requested, or when another request or the tracker is executing it right now.
 */
export async function lockRequestedWithNonce(
  tx: Db,
  actionId: string,
  sender: { address: string; minedNonce: bigint },
): Promise<{ nextNonce: bigint } | undefined> {
  const [row] = await queryRows<{ locked: boolean; next_nonce: string }>(
    tx,
    sql`with action as (
          select action_id from agent_actions where action_id = ${actionId} and status = 'requested'
          for update skip locked),
        nonce as (${nextNonceUpsert(sender.address, sender.minedNonce)})
        select exists (select 1 from action) as locked, (select next_nonce from nonce)::text as next_nonce`,
  );
  return row?.locked ? { nextNonce: BigInt(row.next_nonce) } : undefined;
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
 * maximum fee, as the enclave counts them (DESIGN §5), whatever became of them on chain. An SQL
 * expression (numeric as text), read after the sender's lock.
 */
export function transferCostSinceSql(agentId: string, since: Date): SQL {
  return sql`(select coalesce(sum(cost_units), 0)::text from agent_actions
    where agent_id = ${agentId} and kind = 'transfer' and signed_at >= ${since.toISOString()})`;
}

/**
 * The agent's faucet payouts as one SQL expression (a JSON object): `total_since`, the units
 * signed since `since`, and `last_signed_at`, when the latest was signed.
 */
export function faucetPayoutsSql(agentId: string, since: Date): SQL {
  return sql`(select json_build_object(
      'total_since', coalesce(sum(amount_units) filter (where signed_at >= ${since.toISOString()}), 0)::text,
      'last_signed_at', max(signed_at))
    from agent_actions where agent_id = ${agentId} and kind = 'faucet' and signed_at is not null)`;
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
