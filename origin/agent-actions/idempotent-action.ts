/**
 * The idempotency shell every agent action runs in (docs/api.md#conventions): claim the idempotency
 * key, then run the action, or answer what is already recorded under the key. Same key and
 * another payload: 409 `idempotency_conflict`. Same key and payload: the action's own stored
 * answer when it has one, otherwise it runs (a repeat after a crash or a refusal the action may
 * retry); what running means, and what a stored action answers, belong to the action.
 */
import { AppError } from "../errors.ts";
import type { ActionRow, ClaimActionParams, ClaimResult } from "./repository.ts";

export type ActionClaimer = (params: ClaimActionParams) => Promise<ClaimResult>;

export type IdempotentAction<Answer> = {
  claim: ClaimActionParams;
  /**
   * The request hashes older forms of this same request were stored with, when the action's hash
   * has changed form: a row holding one is the same request, not a conflict. Computed only for a
   * key found with another hash.
   */
  formerRequestHashes?: () => string[];
  /** The answer of a stored action that must not run again, or undefined to run it. */
  answerStored: (action: ActionRow) => Answer | undefined;
  /** Runs the claimed action (or a stored one that answerStored left to run). */
  run: (action: ActionRow) => Promise<Answer>;
};

export async function runIdempotentAction<Answer>(
  claim: ActionClaimer,
  action: IdempotentAction<Answer>,
): Promise<Answer> {
  const claimed = await claim(action.claim);
  if (!claimed.claimed) {
    const sameRequest =
      claimed.samePayload || (action.formerRequestHashes?.().includes(claimed.action.requestHash) ?? false);
    if (!sameRequest) throw idempotencyConflict(claimed.action.actionId);
    const stored = action.answerStored(claimed.action);
    if (stored !== undefined) return stored;
  }
  return action.run(claimed.action);
}

/** 409 `idempotency_conflict` about the action recorded under the key. */
export function idempotencyConflict(
  actionId: string,
  message = "this idempotency_key was already used with another payload",
): AppError {
  return new AppError("idempotency_conflict", message, { fields: { action_id: actionId } });
}
