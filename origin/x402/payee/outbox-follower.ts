/**
 * An x402 settlement's state follows its transaction's (outbox/followers.ts): a stored but unsent
 * settlement is still `claimed`; once broadcast it is `submitted`, whatever the node answered,
 * until the chain decides: `confirmed` is `settled`, `reverted` the same word, and `failed` (another
 * transaction took the settler's nonce: nothing moved) ends it with the reason `broadcast_refused`.
 * Only a settlement still in flight moves.
 */
import { sql } from "drizzle-orm";
import type { OutboxDomains } from "../../outbox/index.ts";

export const settlementsFollower: OutboxDomains["followers"][number] = {
  name: "settlements",
  moved: sql`update x402_settlements x
    set status = case m.status when 'confirmed' then 'settled' else m.status end, updated_at = now(),
        error_reason = case when m.status = 'failed' then 'broadcast_refused' else x.error_reason end
    from moved m where x.tx_id = m.tx_id and x.status in ('claimed', 'submitted')`,
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
