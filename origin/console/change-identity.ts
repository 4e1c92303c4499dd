import type { Handler } from "hono";
import { type IdentityChangeResponse, identityChangeRequestSchema } from "../../shared/console-schemas.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import { parseJsonBody } from "../http/json-body.ts";
import { revokeIdentity, setIdentityEnabled } from "../identity/identity-admin.ts";
import type { Infrastructure } from "../infrastructure.ts";

/**
 * POST {base}/admin/agents/registration/identity
 * (docs/operations.md#the-operator-console-and-metrics): disables, enables or revokes an identity,
 * with a reason, through the services `npm run agents` uses, which record the change, before, after
 * and reason in the same transaction. It applies at the agent's next request, moves no funds and
 * leaves submitted transactions to finish. A revocation is final: enabling a revoked identity sets
 * its flag and answers `revoked: true`, and its token stays refused.
 */
export function changeIdentityHandler(deps: Infrastructure): Handler<AppEnv> {
  return async (c) => {
    const body = await parseJsonBody(c, identityChangeRequestSchema);
    const db = deps.database.db;
    const operator = c.get("operator");
    const result =
      body.action === "revoke"
        ? await revokeIdentity(db, {
            agentId: body.agent_id,
            reason: body.reason,
            source: "console",
            operator,
          })
        : await setIdentityEnabled(db, {
            agentId: body.agent_id,
            enabled: body.action === "enable",
            reason: body.reason,
            source: "console",
            operator,
          });
    if (!result.ok) {
      if (result.error === "not_found") throw new AppError("not_found", "no such agent");
      throw new AppError("validation_failed", "reason must not be empty");
    }
    c.set("logFields", { outcome: `identity_${body.action}`, changed: result.value.changed });
    const response: IdentityChangeResponse = { agent_id: body.agent_id, ...result.value };
    return c.json(response);
  };
}
