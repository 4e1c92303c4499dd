/**
 * An agent action's state is its transaction's from `signed` on (SPEC "States and transitions /
 * Agent action"): the outbox moves both in one statement (outbox/followers.ts). A broadcast the
 * chain refused ends the action `failed` with `broadcast_refused` and the chain's words.
 * It also tells the outbox which key signs for an agent wallet (outbox/tracker-hooks.ts).
 */
import { sql } from "drizzle-orm";
import { pgArrayLiteral, queryRows } from "../db/client.ts";
import { followOutgoing, registerSenderKeys } from "../outbox/index.ts";

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

// An agent wallet's key is the one its identity row names: the gap filler signs its fillers with it.
registerSenderKeys(async (db, addresses) => {
  const rows = await queryRows<{ wallet: string; key_ref: string }>(
    db,
    sql`select assigned_wallet as wallet, agent_transfer_key_ref as key_ref from agent_identities
        where assigned_wallet = any(${pgArrayLiteral([...addresses])}::text[])`,
  );
  return new Map(rows.map((row) => [row.wallet, row.key_ref]));
});
