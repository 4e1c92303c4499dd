/**
 * The idempotent shell around a money operation (SPEC "Agent action"): claim the key, then run the
 * operation, or answer what is already recorded under it. Same key and payload: the stored action
 * (200 once confirmed, 202 in flight), or, for one that ended without moving its amount, the
 * refusal it ended with (view.ts endingRefusal); same key, other payload: 409. A
 * duplicate that finds the action still `requested` and nobody executing it runs it itself (a
 * retry after a crash, or after the signer or the chain could not be used: execute.ts
 * refusesThisRequest), so of concurrent duplicates exactly one signs.
 */
import type { Context } from "hono";
import type { Db } from "../db/client.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import type { ExecuteOutcome, MoneyExecutor, MoneyOperation } from "./operation.ts";
import { type ActionRow, type ClaimActionParams, type ClaimResult, findAction } from "./repository.ts";
import { endingRefusal, respondWithAction } from "./view.ts";

export async function runMoneyAction(
  c: Context<AppEnv>,
  deps: { db: Db; executor: MoneyExecutor; claim: (params: ClaimActionParams) => Promise<ClaimResult> },
  claim: ClaimActionParams,
  operationFor: (actionId: string) => MoneyOperation,
): Promise<Response> {
  const claimed = await deps.claim(claim);
  if (!claimed.claimed) {
    if (!claimed.samePayload) {
      throw new AppError(
        "idempotency_conflict",
        "this idempotency_key was already used with another payload",
        { fields: { action_id: claimed.action.actionId } },
      );
    }
    if (claimed.action.status !== "requested") return respondWithStoredAction(c, claimed.action);
  }
  const actionId = claimed.action.actionId;
  const outcome: ExecuteOutcome = await deps.executor.execute(operationFor(actionId));
  if (outcome.kind === "refused" || outcome.kind === "unavailable") {
    const { refusal } = outcome;
    throw new AppError(refusal.code, refusal.message, {
      headers: refusal.headers,
      fields: { ...refusal.fields, action_id: actionId },
    });
  }
  if (outcome.kind === "busy") {
    // Someone else is executing it: answer what is recorded now.
    const current = await findAction(deps.db, claim.agentId, actionId);
    if (!current) throw new Error(`action ${actionId} vanished`); // a bug: actions are never deleted
    return respondWithStoredAction(c, current);
  }
  // What this request did, without reading it back (the executor answers once it is recorded):
  // `signed` (202), the transaction stored and on its way to the chain (actions/execute.ts).
  // GET /actions/{id} follows it to `confirmed`.
  return respondWithAction(c, {
    ...claimed.action,
    status: "signed",
    txHash: outcome.lease.txHash,
    txId: outcome.lease.txId,
    feeWei: null,
    errorCode: null,
    updatedAt: new Date(),
  });
}

/** The stored action, or the refusal it ended with: a repeat never reads as a success. */
function respondWithStoredAction(c: Context<AppEnv>, action: ActionRow): Response {
  const ended = endingRefusal(action);
  if (ended) {
    throw new AppError(ended.code, ended.message, {
      fields: { ...ended.fields, action_id: action.actionId },
    });
  }
  return respondWithAction(c, action);
}
