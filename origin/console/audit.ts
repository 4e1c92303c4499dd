import type { Handler } from "hono";
import type { AppEnv } from "../http/env.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { readAudit } from "./queries.ts";

/**
 * GET {base}/admin/agents/audit (every change records before, after, reason and time):
 * registration settings, identity enable/disable and funding exceptions, newest first. The audit
 * identifies no person: the credentials are shared (docs/api.md#the-operator-console).
 */
export function auditHandler(deps: Infrastructure): Handler<AppEnv> {
  return async (c) => c.json(await readAudit(deps.database.db));
}
