/**
 * Agent actions (docs/architecture.md#state): the audit and idempotency record of every
 * faucet payout, transfer and x402 authorization, written before anything is signed.
 */
import { createHash } from "node:crypto";
import { type SQL, sql } from "drizzle-orm";
import type { ActionStatus } from "../../shared/gateway-schemas.ts";
import { createBatcher } from "../db/batcher.ts";
import { runByKey } from "../db/by-key.ts";
import { type Db, toDate } from "../db/client.ts";
import {
  type PreparedStatement,
  preparedStatement,
  type RowOf,
  runPrepared,
  textOf,
} from "../db/prepared.ts";

/** `filler`: a filler the service signed from the agent's wallet in place of a stuck transaction (outbox/fillers.ts). */
export type ActionKind = "faucet" | "transfer" | "x402" | "filler";

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
  /**
   * A `failed` action: the extra fields its refusal was answered with, as stored
   * (refusal-fields.ts; parsed there); null when it ended before they were stored.
   */
  errorFields: unknown;
  /** While in flight: the words of its last broadcast that was not accepted. */
  lastBroadcastError: string | null;
  /** Ended `failed` because the agent's filler took its nonce: that filler's action. */
  replacedByActionId: string | null;
  /** A held action: the policy rule that held it, and when it expires unless approved or rejected. */
  holdRule: string | null;
  holdExpiresAt: Date | null;
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
  /** An x402 authorization's purchase when its key was derived (x402/payer/authorize-derived-key.ts). */
  x402Purchase?: string;
};

export type ClaimResult =
  | { claimed: true; action: ActionRow }
  | { claimed: false; action: ActionRow; samePayload: boolean };

/**
 * Records `requested` actions, or finds the ones already recorded under the same (agent, kind,
 * key), in two statements for any number of requests. A concurrent insert of the same key waits
 * for the first to commit, then finds it: of any number of duplicates exactly one claims. Within
 * one call only a key's first request is inserted; the others find it.
 */
export async function claimActions(db: Db, requests: readonly ClaimActionParams[]): Promise<ClaimResult[]> {
  const keyOf = (request: Pick<ClaimActionParams, "agentId" | "kind" | "idempotencyKey">): string =>
    `${request.agentId}|${request.kind}|${request.idempotencyKey}`;
  const firsts = new Map<string, number>();
  requests.forEach((request, index) => {
    if (!firsts.has(keyOf(request))) firsts.set(keyOf(request), index);
  });
  const toInsert = [...firsts.values()].map((index) => {
    const request = requests[index]!;
    return {
      agent_id: request.agentId,
      kind: request.kind,
      idempotency_key: request.idempotencyKey,
      request_hash: request.requestHash,
      amount_units: request.amountUnits?.toString() ?? null,
      to_address: request.toAddress,
      x402_purchase: request.x402Purchase ?? null,
    };
  });
  const inserted = await runPrepared(db, claimStatement, { requests: JSON.stringify(toInsert) });
  const claimed = new Map(
    inserted.map((row) => [
      keyOf({ agentId: row.agent_id, kind: row.kind, idempotencyKey: row.idempotency_key }),
      row,
    ]),
  );
  const found = new Map<string, ActionRow>();
  const missing = requests.filter(
    (request, index) => !(claimed.has(keyOf(request)) && firsts.get(keyOf(request)) === index),
  );
  if (missing.length > 0) {
    const keys = missing.map((request) => ({
      agent_id: request.agentId,
      kind: request.kind,
      key: request.idempotencyKey,
    }));
    const existing = await selectActions(db, byKeysStatement, { keys: JSON.stringify(keys) });
    for (const action of existing) found.set(keyOf(action), action);
  }
  return requests.map((request, index): ClaimResult => {
    const key = keyOf(request);
    const row = claimed.get(key);
    if (row && firsts.get(key) === index) {
      return {
        claimed: true,
        action: {
          ...request,
          actionId: row.action_id,
          status: "requested",
          txHash: null,
          txId: null,
          feeWei: null,
          signedPayload: null,
          errorCode: null,
          errorMessage: null,
          errorFields: null,
          lastBroadcastError: null,
          replacedByActionId: null,
          holdRule: null,
          holdExpiresAt: null,
          createdAt: toDate(row.created_at),
          updatedAt: toDate(row.updated_at),
        },
      };
    }
    const existing = found.get(key);
    if (!existing) throw new Error("action conflict without a row"); // a bug: the insert saw one
    return { claimed: false, action: existing, samePayload: existing.requestHash === request.requestHash };
  });
}

/** One claim (claimActions for a single request). */
export async function claimAction(db: Db, params: ClaimActionParams): Promise<ClaimResult> {
  const [result] = await claimActions(db, [params]);
  return result!;
}

/** Claims that arrive together share the two statements of one claimActions call. */
export function createActionClaimer(db: Db): (params: ClaimActionParams) => Promise<ClaimResult> {
  return createBatcher<ClaimActionParams, ClaimResult>((requests) => claimActions(db, requests), {
    maxBatch: 64,
    maxInFlight: 2,
  });
}

/** The caller's own action (another agent's id reads as not found), with its transaction's fee. */
export async function findAction(db: Db, agentId: string, actionId: string): Promise<ActionRow | undefined> {
  const [row] = await selectActions(db, byIdStatement, { actionId, agentId });
  return row;
}

/** The caller's action recorded under (kind, key), if any: what a repeat of the key names. */
export async function findActionByKey(
  db: Db,
  key: Pick<ClaimActionParams, "agentId" | "kind" | "idempotencyKey">,
): Promise<ActionRow | undefined> {
  const keys = [{ agent_id: key.agentId, kind: key.kind, key: key.idempotencyKey }];
  const [row] = await selectActions(db, byKeysStatement, { keys: JSON.stringify(keys) });
  return row;
}

export const claimStatement = preparedStatement<"requests">(
  "actions_claim",
  sql`insert into agent_actions
        (agent_id, kind, idempotency_key, request_hash, amount_units, to_address, x402_purchase)
      select agent_id, kind, idempotency_key, request_hash, amount_units, to_address, x402_purchase
      from json_to_recordset(${sql.placeholder("requests")}::json) as r(
        agent_id uuid, kind text, idempotency_key text, request_hash text, amount_units numeric,
        to_address text, x402_purchase text)
      on conflict (agent_id, kind, idempotency_key) do nothing
      returning action_id, agent_id, kind, idempotency_key, created_at, updated_at`,
).returns({
  action_id: "uuid",
  agent_id: "uuid",
  kind: textOf<ActionKind>(),
  idempotency_key: "text",
  created_at: "timestamptz",
  updated_at: "timestamptz",
});

/** Actions as the API shows them, with their transactions' fees: `source` names its rows `a`. */
const selectAction = (source: SQL, where: SQL = sql``): SQL =>
  sql`select a.action_id, a.agent_id, a.kind, a.idempotency_key, a.request_hash, a.status,
        a.amount_units::text, a.to_address, a.tx_hash, a.tx_id,
        (select t.fee_wei::text from outgoing_transactions t where t.tx_id = a.tx_id) as fee_wei, a.signed_payload,
        coalesce(a.error_code, case when a.status = 'reverted' then 'reverted' end) as error_code,
        a.error_message, a.error_fields, a.last_broadcast_error, a.replaced_by_action_id, a.hold_rule,
        a.hold_expires_at, a.created_at, a.updated_at
      from ${source} ${where}`;

/**
 * The same columns, of an action a statement has just written as `a`, for its RETURNING: the
 * answer of the request that wrote it (a signed action has no fee yet).
 */
export const storedActionColumns = sql`a.action_id, a.agent_id, a.kind, a.idempotency_key, a.request_hash,
  a.status, a.amount_units::text, a.to_address, a.tx_hash, a.tx_id, null::text as fee_wei, a.signed_payload,
  a.error_code, a.error_message, a.error_fields, a.last_broadcast_error, a.replaced_by_action_id, a.hold_rule,
  a.hold_expires_at, a.created_at, a.updated_at`;

/** The columns selectAction returns. */
const actionColumns = {
  action_id: "uuid",
  agent_id: "uuid",
  kind: textOf<ActionKind>(),
  idempotency_key: "text",
  request_hash: "text",
  status: textOf<ActionStatus>(),
  amount_units: "text?",
  to_address: "text?",
  tx_hash: "text?",
  tx_id: "uuid?",
  fee_wei: "text?",
  signed_payload: "jsonb?",
  error_code: "text?",
  error_message: "text?",
  error_fields: "jsonb?",
  last_broadcast_error: "text?",
  replaced_by_action_id: "uuid?",
  hold_rule: "text?",
  hold_expires_at: "timestamptz?",
  created_at: "timestamptz",
  updated_at: "timestamptz",
} as const;

export const byIdStatement = preparedStatement<"actionId" | "agentId">(
  "actions_by_id",
  selectAction(
    sql`agent_actions a`,
    // The owner is tested through coalesce, which no index takes as a condition: planned on a new
    // node's small tables, a search by agent_id read the idempotency index through the agent's
    // every action (db/prepared.int.test.ts). agent_id is never null.
    sql`where a.action_id = ${sql.placeholder("actionId")}::uuid
          and coalesce(a.agent_id, ${sql.placeholder("agentId")}::uuid) = ${sql.placeholder("agentId")}::uuid`,
  ),
).returns(actionColumns);

// One probe of the idempotency index per key (a join the planner could turn into a scan).
export const byKeysStatement = preparedStatement<"keys">(
  "actions_by_keys",
  selectAction(
    sql`json_to_recordset(${sql.placeholder("keys")}::json) as k(agent_id uuid, kind text, key text)
        cross join lateral (select * from agent_actions b
          where b.agent_id = k.agent_id and b.kind = k.kind and b.idempotency_key = k.key) a`,
  ),
).returns(actionColumns);

/**
 * Under runByKey, whatever the tables held when a connection planned the read: planned on a
 * database analyzed empty, the fee's join read outgoing_transactions whole on every poll of
 * GET /v1/actions/{id} (db/prepared.int.test.ts).
 */
async function selectActions<P extends string>(
  db: Db,
  statement: PreparedStatement<P, typeof actionColumns>,
  values: Record<P, unknown>,
): Promise<ActionRow[]> {
  const rows = await runByKey(db, statement, values);
  return rows.map(actionOf);
}

type ActionColumnsRow = RowOf<typeof actionColumns>;

/**
 * An action from the row a statement returned with storedActionColumns, as JSON (the outbox's store
 * statement returns its answer so: its timestamps are strings).
 */
export function storedAction(json: unknown): ActionRow {
  return actionOf(json as ActionColumnsRow);
}

function actionOf(row: ActionColumnsRow): ActionRow {
  return {
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
    errorFields: row.error_fields,
    lastBroadcastError: row.last_broadcast_error,
    replacedByActionId: row.replaced_by_action_id,
    holdRule: row.hold_rule,
    holdExpiresAt: row.hold_expires_at === null ? null : toDate(row.hold_expires_at),
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
  };
}
