/**
 * Signs the transfers an operator approved (`npm run policy -- approve`: the approval sealed in the
 * enclave, the action `approved`): each through the executor as a request would run it, with every
 * rule of the agent's policy but the hold (a budget spent meanwhile still refuses it). Every origin
 * runs the loop; the executor's claim (skip locked) has each approved action signed once.
 */
import { sql } from "drizzle-orm";
import { runByKey } from "../db/by-key.ts";
import type { Db } from "../db/client.ts";
import { preparedStatement } from "../db/prepared.ts";
import type { Logger } from "../logger.ts";
import { startLoop, type Worker } from "../workers/loop.ts";
import type { MoneyServices } from "./money-services.ts";
import { transferOperation } from "./transfers.ts";

/** How often the origin looks for approved transfers: an operator waits about this long at most. */
const PERIOD_MS = 1_000;
const BATCH = 32;

/**
 * A disabled or revoked identity's approved transfer waits, or ends `expired` when its hold would
 * have (agent-actions/holds.ts): nothing of a disabled identity is signed. Read in updated_at order
 * through the index of the actions to sign, under the outbox's planner settings (runByKey). The
 * kind is tested through coalesce so that no index can take it as a condition: planned on a new
 * node's empty tables, `kind = 'transfer'` made the idempotency index's second column the scan's
 * condition, and the plan a connection keeps then read every transfer the node ever made, once a
 * second (docs/performance.md, "Money").
 */
export const approvedStatement = preparedStatement<"limit">(
  "money_approved_transfers",
  sql`select a.action_id, a.agent_id, a.to_address, a.amount_units::text, i.assigned_wallet,
        i.agent_transfer_key_ref as key_ref
      from agent_actions a join agent_identities i on i.agent_id = a.agent_id
      where a.status = 'approved' and coalesce(a.kind, '') = 'transfer' and i.enabled and not i.revoked
      order by a.updated_at limit ${sql.placeholder("limit")}::int`,
).returns({
  action_id: "uuid",
  agent_id: "uuid",
  to_address: "text",
  amount_units: "text",
  assigned_wallet: "text",
  key_ref: "text",
});

/** Runs the approved transfers now; resolves with how many it signed. */
export async function signApprovedTransfers(
  services: Pick<MoneyServices, "config" | "clock" | "executor"> & { db: Db },
): Promise<number> {
  const rows = await runByKey(services.db, approvedStatement, { limit: BATCH });
  const outcomes = await Promise.all(
    rows.map((row) =>
      services.executor.execute(
        transferOperation(services, {
          actionId: row.action_id,
          agent: {
            agentId: row.agent_id,
            assignedWallet: row.assigned_wallet as `0x${string}`,
            keyRef: row.key_ref,
          },
          to: row.to_address,
          amount: BigInt(row.amount_units),
          approved: true,
        }),
      ),
    ),
  );
  return outcomes.filter((outcome) => outcome.kind === "signed").length;
}

export function startApprovedTransfers(
  services: Pick<MoneyServices, "config" | "clock" | "executor"> & { db: Db },
  logger: Logger,
): Worker {
  return startLoop("approved-transfers", PERIOD_MS, logger, async () => {
    const signed = await signApprovedTransfers(services);
    if (signed > 0) logger.info({ signed }, "approved transfers signed");
  });
}
