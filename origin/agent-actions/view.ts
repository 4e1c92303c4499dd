import type { Context } from "hono";
import { type ActionView, isTerminalAction } from "../../shared/gateway-schemas.ts";
import { ERROR_STATUS, type ErrorCode } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import type { Refusal } from "./refusal.ts";
import { replayedRefusalFields } from "./refusal-fields.ts";
import type { ActionRow } from "./repository.ts";

/** The action on the wire. */
export function actionView(action: ActionRow): ActionView {
  return {
    action_id: action.actionId,
    kind: action.kind,
    status: action.status,
    tx_hash: action.txHash,
    amount: action.amountUnits?.toString() ?? null,
    to: action.toAddress,
    fee_wei: action.feeWei?.toString() ?? null,
    error_code: action.status === "failed" || action.status === "reverted" ? action.errorCode : null,
    last_broadcast_error: action.status === "submitted" ? action.lastBroadcastError : null,
    replaced_by: action.replacedByActionId,
    rule: action.holdRule,
    expires_at: action.status === "held" ? (action.holdExpiresAt?.toISOString() ?? null) : null,
    created_at: action.createdAt.toISOString(),
    updated_at: action.updatedAt.toISOString(),
  };
}

/** 200 once the action is terminal, 202 while it is in flight. */
export function respondWithAction(c: Context<AppEnv>, action: ActionRow): Response {
  return c.json(actionView(action), isTerminalAction(action) ? 200 : 202);
}

/**
 * The refusal a `failed`, `reverted`, `rejected` or `expired` action ended with, as a repeat of its
 * key answers it (the same status and code as the first answer, the stored message), so a repeat
 * can never read as a success; null for an action that has not ended so. A refusal answers its
 * first answer's fields and Retry-After again, a wait counted down to `now`
 * (docs/agents.md#moving-money). A held action an operator rejected, or nobody decided before its
 * hold ran out, ends under the policy rule that held it: 403 `policy_denied` naming that rule
 * (docs/agents.md#your-spending-policy).
 */
export function endingRefusal(action: ActionRow, now: Date): Refusal | null {
  const txHash: Record<string, string> = action.txHash ? { tx_hash: action.txHash } : {};
  if (action.status === "rejected" || action.status === "expired") {
    const how =
      action.status === "rejected"
        ? "an operator rejected this held request"
        : "this held request's hold expired before it was approved and signed";
    return {
      code: "policy_denied",
      message: `${how}; nothing was signed, and this idempotency_key's request is over`,
      fields: { rule: action.holdRule ?? "approval", remaining: "0" },
    };
  }
  if (action.status === "reverted") {
    return {
      code: "reverted",
      message:
        "the transaction was mined and reverted: the amount did not move, its fee was paid; this idempotency_key's request is over",
      fields: txHash,
    };
  }
  if (action.status !== "failed") return null;
  const code = action.errorCode;
  const stored = action.errorMessage ?? code ?? "the request failed";
  if (code === "broadcast_refused") {
    return {
      code,
      message: `the signed transaction was never mined: ${stored}; nothing moved, and this idempotency_key's request is over`,
      fields: txHash,
    };
  }
  if (code !== null && isErrorCode(code)) return { code, message: stored, ...firstAnswerFields(action, now) };
  // A code the table does not know (a bug): still a failure, never a success.
  return { code: "internal_error", message: `the request failed (${code ?? "no code"})` };
}

/**
 * The fields and headers the refusal was first answered with. An action that ended before they
 * were stored (agent_actions.error_fields null) answers none, except that a policy's refusal still
 * names its rule and what remained, from where it was kept before.
 */
function firstAnswerFields(action: ActionRow, now: Date): Pick<Refusal, "fields" | "headers"> {
  const replayed = replayedRefusalFields(action.errorFields, now);
  if (replayed) return replayed;
  return action.errorCode === "policy_denied" ? { fields: deniedFields(action) } : {};
}

/** A denied action's rule and remaining, as kept before error_fields (x402: signed_payload.denied). */
function deniedFields(action: ActionRow): Record<string, string> {
  const denied = (action.signedPayload as { denied?: { rule?: unknown; remaining?: unknown } } | null)
    ?.denied;
  const rule = typeof denied?.rule === "string" ? denied.rule : (action.holdRule ?? undefined);
  const remaining = typeof denied?.remaining === "string" ? denied.remaining : "0";
  return rule === undefined ? {} : { rule, remaining };
}

function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_STATUS, code);
}
