/**
 * An x402 settlement's state follows its transaction's (outbox/followers.ts): a stored but unsent
 * settlement is still `claimed`, `confirmed` is `settled`, and `submitted`, `failed` and `reverted`
 * are the same words. Only a settlement still in flight moves. A broadcast the chain refused ends
 * it `failed` with the reason `broadcast_refused`.
 */
import { sql } from "drizzle-orm";
import { followOutgoing, type TxStatus } from "../outbox/index.ts";

followOutgoing({
  name: "settlements",
  mined: sql`update x402_settlements x
    set status = case m.status when 'confirmed' then 'settled' else m.status end, updated_at = now()
    from moved m where x.tx_id = m.tx_id and x.status in ('claimed', 'submitted')`,
  moved: (status, refusal) => sql`update x402_settlements
    set status = ${settlementState(status)}, updated_at = now(),
        error_reason = coalesce(${refusal === null ? null : "broadcast_refused"}, error_reason)
    where tx_id in (select tx_id from moved) and status in ('claimed', 'submitted')`,
});

function settlementState(status: TxStatus): string {
  switch (status) {
    case "signed":
      return "claimed";
    case "confirmed":
      return "settled";
    default:
      return status;
  }
}
