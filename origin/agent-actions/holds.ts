/**
 * Held actions nobody decided in time (docs/agents.md#holds): a `held` action whose hold ran out
 * ends `expired`, never signed; so does an `approved` one still unsigned when its hold would have
 * ended: an x402 authorization the agent did not come back for before its quote's validity ran
 * out, or a transfer the origin did not sign (actions/approved.ts signs it at once, unless its
 * identity is disabled): its approval in the enclave lasts no longer, so it could only be refused.
 * The transaction tracker runs the sweep on each of its sweeps.
 */
import { sql } from "drizzle-orm";
import { runByKey } from "../db/by-key.ts";
import { preparedStatement } from "../db/prepared.ts";
import type { OutboxDomains } from "../outbox/index.ts";

// One `in` over the union of both, not `in (…) or in (…)`: Postgres can only answer an OR of two
// subqueries by reading every row of agent_actions, on every sweep. The approved branch names no
// kind, so that no index takes it as a condition (planned on a new node's empty tables, `kind =
// 'x402'` searched the idempotency index by its second column, every x402 authorization the node
// had made, on every sweep); it reads the index of the actions to sign.
// Under the outbox's planner settings (runByKey): planned on empty tables without them, the update
// joined the expired rows by hash over a sequential scan of agent_actions, every action ever made.
export const expireHoldsStatement = preparedStatement<never>(
  "tracker_expire_holds",
  sql`update agent_actions set status = 'expired', updated_at = now()
      where action_id in (
        with held as (
          select action_id from agent_actions
          where status = 'held' and hold_expires_at < now()
          order by hold_expires_at limit 100 for update skip locked),
        approved as (
          select action_id from agent_actions
          where status = 'approved' and hold_expires_at < now()
          order by updated_at limit 100 for update skip locked)
        select action_id from held union all select action_id from approved)
      returning action_id`,
).returns({ action_id: "uuid" });

export const expireHoldsSweep: OutboxDomains["sweeps"][number] = {
  name: "expire_held_actions",
  async run(db) {
    return (await runByKey(db, expireHoldsStatement, {})).length;
  },
};
