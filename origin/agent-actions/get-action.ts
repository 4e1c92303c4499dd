import type { Handler } from "hono";
import { isTerminalAction } from "../../shared/gateway-schemas.ts";
import { isUuid } from "../../shared/uuid.ts";
import type { Db } from "../db/client.ts";
import { AppError } from "../errors.ts";
import type { ActionWaiter } from "../events/action-wait.ts";
import type { AppEnv } from "../http/env.ts";
import { findAction } from "./repository.ts";
import { actionView } from "./view.ts";

/** `?wait=` is whole seconds, at most this many (docs/events.md#waiting-for-an-action). */
export const MAX_WAIT_SECONDS = 30;

/**
 * GET /agent/v1/actions/{action_id}: the caller's own action. Another agent's id is
 * 404 exactly like an unknown one, so ids reveal nothing across agents. With `?wait=SECONDS` and
 * a waiter (the events capability), an action still in flight is answered when its status changes
 * or when the wait ends, whichever comes first.
 */
export function getActionHandler(db: Db, waiter?: ActionWaiter): Handler<AppEnv> {
  return async (c) => {
    const agentId = c.get("agent").agentId;
    const actionId = c.req.param("action_id")?.toLowerCase() ?? "";
    const waitSeconds = parseWait(c.req.query("wait"));
    const read = async () => {
      const action = isUuid(actionId) ? await findAction(db, agentId, actionId) : undefined;
      if (!action) throw new AppError("not_found", "no such action");
      return action;
    };
    const watch =
      waitSeconds > 0 && waiter && isUuid(actionId) ? await waiter.watch(agentId, actionId) : undefined;
    try {
      let action = await read();
      const signal = c.req.raw.signal;
      const until = Date.now() + waitSeconds * 1000;
      // An event of another status wakes the wait; the action read again says whether it changed.
      // One that has not was woken by its own history served late (a long transaction on the
      // cluster holds the log back, docs/events.md#order): the wait goes on for what is left.
      while (
        watch &&
        !waiter?.released() &&
        !isTerminalAction(action) &&
        !signal.aborted &&
        Date.now() < until
      ) {
        const status = action.status;
        await watch.changed(status, until - Date.now(), signal);
        action = await read();
        if (action.status !== status) break;
      }
      return c.json(actionView(action), 200);
    } finally {
      watch?.close();
    }
  };
}

/** Absent is 0; anything but a whole number from 0 to MAX_WAIT_SECONDS is refused. */
function parseWait(value: string | undefined): number {
  if (value === undefined) return 0;
  if (!/^\d{1,2}$/.test(value) || Number(value) > MAX_WAIT_SECONDS) {
    throw new AppError(
      "validation_failed",
      `wait must be a whole number of seconds from 0 to ${MAX_WAIT_SECONDS}`,
    );
  }
  return Number(value);
}
