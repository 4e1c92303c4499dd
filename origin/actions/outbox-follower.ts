/**
 * An agent action's state is its transaction's from `signed` on (docs/api.md#faucet-and-transfer-actions-states): the outbox moves both in one statement (outbox/followers.ts), with this
 * follower, which the composition root hands it. While in flight (`submitted`) the action
 * carries the words of its last broadcast that was not accepted; once another transaction took its
 * nonce it ends `failed` with `broadcast_refused` and what happened.
 * It also tells the outbox which key signs for an agent wallet, and shows the agent a filler its
 * wallet pays for (outbox/tracker-hooks.ts), handed to the outbox the same way.
 */
import { sql } from "drizzle-orm";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import { requestHash } from "../agent-actions/repository.ts";
import { pgArrayLiteral, queryRows } from "../db/client.ts";
import type { OutboxDomains } from "../outbox/index.ts";

export const actionsFollower: OutboxDomains["followers"][number] = {
  name: "actions",
  // Found through the moved transactions' keys, whatever the plan the statement was prepared with
  // (a join alone could scan every action; outbox/store.ts recordMinedStatement).
  moved: sql`update agent_actions a
    set status = m.status, updated_at = now(),
        last_broadcast_error = case when m.status = 'submitted' then m.error end,
        error_code = case when m.status = 'failed' then 'broadcast_refused' else a.error_code end,
        error_message = case when m.status = 'failed' then m.error else a.error_message end,
        replaced_by_action_id = case when m.status = 'failed' then
          (select f.action_id from agent_actions f where f.tx_id = m.taken_by and f.kind = 'filler') end
    from moved m where a.tx_id = m.tx_id and a.tx_id = any(array(select tx_id from moved))
      and a.status in ('signed', 'submitted')`,
};

// An agent wallet's key is the one its identity row names: the gap filler signs its fillers with it.
export const agentWalletKeys: OutboxDomains["senderKeys"][number] = async (db, addresses) => {
  const rows = await queryRows<{ wallet: string; key_ref: string }>(
    db,
    sql`select assigned_wallet as wallet, agent_transfer_key_ref as key_ref from agent_identities
        where assigned_wallet = any(${pgArrayLiteral([...addresses])}::text[])`,
  );
  return new Map(rows.map((row) => [row.wallet, row.key_ref]));
};

// A filler from an agent's wallet is the agent's too: an action of kind `filler` (amount 0, to the
// wallet itself) following the filler's transaction, and its most possible fee counted against the
// agent's daily transfer limit, as the enclave counts it (docs/api.md#faucet-and-transfer-actions-states).
// Written in the statement that stores the filler; a filler of another sender finds no identity.
export const agentFillerRows: OutboxDomains["fillerRows"][number] = {
  signedColumns: sql`filler_request_hash text, filler_cost_units numeric, filler_counted_on date`,
  row: (filler) => ({
    filler_request_hash: requestHash("filler", { nonce: filler.nonce.toString() }),
    filler_cost_units: ((filler.maxCostWei + WEI_PER_UNIT - 1n) / WEI_PER_UNIT).toString(),
    filler_counted_on: filler.countedOn,
  }),
  ctes: [
    {
      name: "filler_actions",
      sql: sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, status, amount_units,
          to_address, tx_id, tx_hash, cost_units, signed_at)
        select i.agent_id, 'filler', 'filler:' || s.nonce, s.filler_request_hash, 'signed', 0, s.sender,
          st.tx_id, st.tx_hash, s.filler_cost_units, now()
        from signed s join stored st on st.tx_hash = s.tx_hash
          join agent_identities i on i.assigned_wallet = s.sender
        on conflict (agent_id, kind, idempotency_key) do nothing
        returning agent_id, tx_id, cost_units`,
    },
    {
      // On the day the enclave counted the fee on, its sealed spend being the bound: the database's
      // clock reads a moment after the enclave's, maybe across midnight, and the gateway's refusals
      // of that day must be the enclave's. An enclave that does not say: the database's day.
      name: "filler_spend",
      sql: sql`insert into transfer_daily_spend as d (agent_id, day, spent_units)
        select f.agent_id, coalesce(s.filler_counted_on, (now() at time zone 'utc')::date), sum(f.cost_units)
        from filler_actions f join stored st on st.tx_id = f.tx_id join signed s on s.tx_hash = st.tx_hash
        group by 1, 2
        on conflict (agent_id, day) do update set spent_units = d.spent_units + excluded.spent_units`,
    },
  ],
};
