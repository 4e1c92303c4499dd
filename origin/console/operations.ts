import type { Handler } from "hono";
import type { OperationsOverview } from "../../shared/console-schemas.ts";
import type { AppEnv } from "../http/env.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { readOperations } from "./queries.ts";

/**
 * GET {base}/admin/agents/operations (ours, beyond the spec; read only): identity findings by
 * class, key batches by state, actions by kind and state with the latest, x402 settlements by
 * state, and the active funding exceptions.
 */
export function operationsHandler(deps: Infrastructure): Handler<AppEnv> {
  return async (c) => {
    const now = deps.clock.now();
    const body: OperationsOverview = {
      generated_at: now.toISOString(),
      ...(await readOperations(deps.database.db, now)),
    };
    return c.json(body);
  };
}
