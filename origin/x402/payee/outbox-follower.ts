/**
 * An x402 settlement's state follows its transaction's (outbox/followers.ts): a stored but unsent
 * settlement is still `claimed`; once broadcast it is `submitted`, whatever the node answered,
 * until the chain decides: `confirmed` is `settled`, `reverted` the same word, and `failed` (another
 * transaction took the settler's nonce: nothing moved) ends it with the reason `broadcast_refused`.
 * Only a settlement still in flight moves. Found through the moved transactions' keys, whatever the
 * plan the statement was prepared with (a join alone read the tx index end to end, as the actions'
 * follower notes).
 */
import { sql } from "drizzle-orm";
import type { OutboxDomains } from "../../outbox/index.ts";

export const settlementsFollower: OutboxDomains["followers"][number] = {
  name: "settlements",
  moved: sql`update x402_settlements x
    set status = case m.status when 'confirmed' then 'settled' else m.status end, updated_at = now(),
        error_reason = case when m.status = 'failed' then 'broadcast_refused' else x.error_reason end
    from moved m where x.tx_id = m.tx_id and x.tx_id = any(array(select tx_id from moved))
      and x.status in ('claimed', 'submitted')`,
};

/**
 * A settlement that reverts is also recorded in x402_reverts, in the same statement, for the revert
 * guard's count (revert-guard.ts); as above, only a settlement still in flight moves.
 */
export const settlementRevertsFollower: OutboxDomains["followers"][number] = {
  name: "reverts",
  moved: sql`insert into x402_reverts (settlement_id, payer)
    select x.id, x.payer from moved m join x402_settlements x on x.tx_id = m.tx_id
    where m.status = 'reverted' and x.status in ('claimed', 'submitted')
    on conflict (settlement_id) do nothing`,
};

/**
 * A settlement mined is reserved against its payer's balances read at earlier blocks only: its
 * reservation (reservations.ts) takes the block, in the same statement; as above, only a
 * settlement still in flight moves.
 */
export const reservationMinedFollower: OutboxDomains["followers"][number] = {
  name: "reservations_mined",
  moved: sql`update x402_reservations r set settled_block = m.block_number
    from moved m join x402_settlements x on x.tx_id = m.tx_id
    where r.settlement_id = x.id and m.status = 'confirmed' and x.status in ('claimed', 'submitted')`,
};

/** A settlement that reverted or failed moved nothing: its reservation goes. */
export const reservationEndedFollower: OutboxDomains["followers"][number] = {
  name: "reservations_ended",
  moved: sql`delete from x402_reservations r
    using moved m join x402_settlements x on x.tx_id = m.tx_id
    where r.settlement_id = x.id and m.status in ('reverted', 'failed') and x.status in ('claimed', 'submitted')`,
};
