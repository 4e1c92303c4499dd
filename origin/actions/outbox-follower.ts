/**
 * An agent action's state is its transaction's from `signed` on (SPEC "States and transitions /
 * Agent action"): the outbox moves both in one statement (outbox/followers.ts). A broadcast the
 * chain refused ends the action `failed` with `broadcast_refused` and the chain's words.
 */
import { sql } from "drizzle-orm";
import { followOutgoing } from "../outbox/index.ts";

followOutgoing({
  name: "actions",
  // Found through the moved transactions' keys, whatever the plan the statement was prepared with
  // (a join alone could scan every action; outbox/store.ts recordMinedStatement).
  mined: sql`update agent_actions a set status = m.status, updated_at = now()
    from moved m where a.tx_id = m.tx_id and a.tx_id = any(array(select tx_id from moved))`,
  moved: (status, refusal) => sql`update agent_actions
    set status = ${status}, updated_at = now(),
        error_code = coalesce(${refusal === null ? null : "broadcast_refused"}, error_code),
        error_message = coalesce(${refusal}, error_message)
    where tx_id in (select tx_id from moved)`,
});
