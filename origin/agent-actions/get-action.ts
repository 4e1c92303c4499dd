import type { Handler } from "hono";
import type { Db } from "../db/client.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import { findAction } from "./repository.ts";
import { actionView } from "./view.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * GET /agent/v1/actions/{action_id}: the caller's own action. Another agent's id is
 * 404 exactly like an unknown one, so ids reveal nothing across agents.
 */
export function getActionHandler(db: Db): Handler<AppEnv> {
  return async (c) => {
    const actionId = c.req.param("action_id")?.toLowerCase() ?? "";
    const action = UUID.test(actionId) ? await findAction(db, c.get("agent").agentId, actionId) : undefined;
    if (!action) throw new AppError("not_found", "no such action");
    return c.json(actionView(action), 200);
  };
}
