import type { Handler } from "hono";
import type { AppEnv } from "../http/env.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { readAudit } from "./queries.ts";

/**
 * GET {base}/admin/agents/audit (every change records before, after, reason and time):
 * registration settings, identities, funding exceptions, webhook endpoints and passkey approvals,
 * newest first, each naming the operator and passkey when a session or an approval made it
 * (docs/api.md#the-operator-console).
 */
export function auditHandler(deps: Infrastructure): Handler<AppEnv> {
  return async (c) => c.json(await readAudit(deps.database.db));
}
