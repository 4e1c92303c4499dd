/**
 * A money operation in the idempotency shell (agent-actions/idempotent-action.ts; docs/api.md#conventions). Same
 * key and payload: the stored action (200 once confirmed, 202 in flight), or, for one that ended
 * without moving its amount, the refusal it ended with (view.ts endingRefusal). A duplicate that
 * finds the action still `requested` and nobody executing it runs it itself (a retry after a
 * crash, or after the signer or the chain could not be used: not-signed.ts refusesThisRequest), so
 * of concurrent duplicates exactly one signs.
 */
import type { Context } from "hono";
import { type ActionClaimer, runIdempotentAction } from "../agent-actions/idempotent-action.ts";
import { type ActionRow, type ClaimActionParams, findAction } from "../agent-actions/repository.ts";
import { endingRefusal, respondWithAction } from "../agent-actions/view.ts";
import type { Db } from "../db/client.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import type { ExecuteOutcome, MoneyExecutor, MoneyOperation } from "./operation.ts";

export async function runMoneyAction(
  c: Context<AppEnv>,
  deps: { db: Db; executor: MoneyExecutor; claim: ActionClaimer },
  claim: ClaimActionParams,
  operationFor: (actionId: string) => MoneyOperation,
): Promise<Response> {
  return runIdempotentAction(deps.claim, {
    claim,
    answerStored: (action) =>
      action.status === "requested" ? undefined : respondWithStoredAction(c, action),
    run: (action) => executeMoneyAction(c, deps, action, operationFor),
  });
}

async function executeMoneyAction(
  c: Context<AppEnv>,
  deps: { db: Db; executor: MoneyExecutor },
  claimed: ActionRow,
  operationFor: (actionId: string) => MoneyOperation,
): Promise<Response> {
  const { actionId } = claimed;
  const outcome: ExecuteOutcome = await deps.executor.execute(operationFor(actionId));
  if (outcome.kind === "refused" || outcome.kind === "unavailable") {
    const { refusal } = outcome;
    throw new AppError(refusal.code, refusal.message, {
      headers: refusal.headers,
      fields: { ...refusal.fields, action_id: actionId },
    });
  }
  if (outcome.kind === "busy" || outcome.kind === "held") {
    // Someone else is executing it, or the agent's policy held it (202 `held`, with its rule and
    // expiry): answer what is recorded now.
    const current = await findAction(deps.db, claimed.agentId, actionId);
    if (!current) throw new Error(`action ${actionId} vanished`); // a bug: actions are never deleted
    return respondWithStoredAction(c, current);
  }
  // `signed` (202), as the statement that stored the transaction returned the action: the
  // transaction on its way to the chain (actions/execute.ts). GET /actions/{id} follows it to
  // `confirmed`.
  return respondWithAction(c, outcome.action);
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
