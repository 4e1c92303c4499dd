import type { Context } from "hono";
import { type ActionView, isTerminalAction } from "../../shared/gateway-schemas.ts";
import type { AppEnv } from "../http/env.ts";
import type { ActionRow } from "./repository.ts";

/** DESIGN §7: the action on the wire. */
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
    created_at: action.createdAt.toISOString(),
    updated_at: action.updatedAt.toISOString(),
  };
}

/** DESIGN §7: 200 once the action is terminal, 202 while it is in flight. */
export function respondWithAction(c: Context<AppEnv>, action: ActionRow): Response {
  return c.json(actionView(action), isTerminalAction(action) ? 200 : 202);
}
