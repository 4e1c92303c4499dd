/**
 * A money operation in the idempotency shell (agent-actions/idempotent-action.ts; docs/api.md#conventions). Same
 * key and payload: the stored action (200 once confirmed, 202 in flight), or, for one that ended
 * without moving its amount, the refusal it ended with (view.ts endingRefusal). A duplicate that
 * finds the action still `requested` and nobody executing it runs it itself (a retry after a
 * crash, or after the signer or the chain could not be used: not-signed.ts refusesThisRequest), so
 * of concurrent duplicates exactly one signs.
 */
import type { Context } from "hono";
import type { PolicyDecision } from "../../shared/agent-policy.ts";
import { type ActionClaimer, runIdempotentAction } from "../agent-actions/idempotent-action.ts";
import { type ActionRow, type ClaimActionParams, findAction } from "../agent-actions/repository.ts";
import { endingRefusal, respondWithAction } from "../agent-actions/view.ts";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/client.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import type { ExecuteOutcome, MoneyExecutor, MoneyOperation } from "./operation.ts";

export async function runMoneyAction(
  c: Context<AppEnv>,
  deps: MoneyActionDeps & { claim: ActionClaimer },
  claim: ClaimActionParams,
  operationFor: (actionId: string) => MoneyOperation,
): Promise<Response> {
  return runIdempotentAction(deps.claim, {
    claim,
    answerStored: (action) =>
      action.status === "requested" ? undefined : respondWithStoredAction(c, action, deps.clock.now()),
    run: (action) => executeMoneyAction(c, deps, action, operationFor),
  });
}

type MoneyActionDeps = {
  db: Db;
  executor: MoneyExecutor;
  /** A repeat's time: a stored refusal's wait is told from it (agent-actions/refusal-fields.ts). */
  clock: Clock;
  /** Told what the agent's spending policy decided of a transfer (metrics). */
  policyDecided?: (decision: PolicyDecision) => void;
};

async function executeMoneyAction(
  c: Context<AppEnv>,
  deps: MoneyActionDeps,
  claimed: ActionRow,
  operationFor: (actionId: string) => MoneyOperation,
): Promise<Response> {
  const { actionId } = claimed;
  const outcome: ExecuteOutcome = await deps.executor.execute(operationFor(actionId));
  if (claimed.kind === "transfer") countPolicyDecision(deps, c.get("agent").hasPolicy, outcome);
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
    if (outcome.kind === "held" && current.holdRule) {
      deps.policyDecided?.({ decision: "hold", rule: current.holdRule, remaining: null });
    }
    return respondWithStoredAction(c, current, deps.clock.now());
  }
  // `signed` (202), as the statement that stored the transaction returned the action: the
  // transaction on its way to the chain (actions/execute.ts). GET /actions/{id} follows it to
  // `confirmed`.
  return respondWithAction(c, outcome.action);
}

/**
 * The stored action, or the refusal it ended with, answered as the first answer was (its fields
 * and Retry-After, the wait counted to `now`): a repeat never reads as a success.
 */
function respondWithStoredAction(c: Context<AppEnv>, action: ActionRow, now: Date): Response {
  const ended = endingRefusal(action, now);
  if (ended) {
    throw new AppError(ended.code, ended.message, {
      headers: ended.headers,
      fields: { ...ended.fields, action_id: action.actionId },
    });
  }
  return respondWithAction(c, action);
}

/** The policy's decisions the outcome shows: a refusal by a rule, or a signature under a policy. */
function countPolicyDecision(deps: MoneyActionDeps, hasPolicy: boolean, outcome: ExecuteOutcome): void {
  if (!deps.policyDecided) return;
  if (outcome.kind === "refused" && outcome.refusal.code === "policy_denied") {
    const rule = String(outcome.refusal.fields?.rule ?? "policy");
    deps.policyDecided({
      decision: "deny",
      rule,
      remaining: String(outcome.refusal.fields?.remaining ?? "0"),
    });
  } else if (outcome.kind === "signed" && hasPolicy) {
    deps.policyDecided({ decision: "allow" });
  }
}
