/**
 * Who decides a transaction's end: the chain (docs/architecture.md#who-decides-a-transactions-end).
 * A transaction stays in flight, whatever nodes answered its broadcasts, until the sender's mined
 * nonce has passed its nonce. Then the transaction mined at that nonce decides:
 *   - one of the service's (the payment itself, or the filler beside it): its receipt is recorded,
 *     and the same statement ends the others at that nonce `failed` (store.ts recordMined);
 *   - none of the service's (a transaction signed without it, or a node that lags behind the one
 *     that mined ours and has no receipt for it yet): the transaction is called `failed` only once
 *     the nonce has been seen passed, with none of ours mined, for `decideAfterMs` without a break.
 *     A lagging node catches up well within that; a transaction signed without the service (its key
 *     used elsewhere) never will. A tracker whose receipt reads of a transaction failed saw nothing
 *     of it meanwhile: its next "no receipt" answer starts the wait again (`restart`), so one such
 *     answer after a long outage does not end the transaction at once. The failed reads of one
 *     origin (its node out of reach) leave alone what another origin's tracker sees.
 */
import { sql } from "drizzle-orm";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { type Db, queryRows } from "../db/client.ts";
import { minedNonces } from "./chain-reads.ts";
import type { OutboxStore } from "./store.ts";

/**
 * An in-flight transaction without a receipt in the latest read; `restart` when this tracker's
 * reads of its receipt failed since it last saw it without one (the wait starts again).
 */
export type Unmined = { txId: string; sender: string; nonce: bigint; restart?: boolean };

/**
 * Reads the senders' mined nonces; marks each unmined transaction whose nonce the chain has passed
 * (and clears the mark of one it has not, a node that answered ahead of another), and ends `failed`
 * those marked for `decideAfterMs`. Returns how many it ended; nothing when the chain did not answer.
 */
export async function decidePassed(
  deps: { db: Db; rpc: JsonRpcUpstream; store: OutboxStore },
  unmined: readonly Unmined[],
  decideAfterMs: number,
  /** Told of each transaction whose mark this look set, kept or cleared (its sender's nonce read). */
  looked: (txId: string) => void = () => {},
): Promise<number> {
  if (unmined.length === 0) return 0;
  const mined = await minedNonces(
    deps.rpc,
    unmined.map((tx) => tx.sender),
  );
  const seen = unmined.flatMap((tx) => {
    const chainNonce = mined.get(tx.sender);
    return chainNonce === undefined
      ? []
      : [{ tx_id: tx.txId, passed: chainNonce > tx.nonce, restart: tx.restart === true }];
  });
  if (seen.length === 0) return 0;
  for (const tx of seen) looked(tx.tx_id);
  const due = await queryRows<{ tx_id: string; nonce: string | bigint }>(
    deps.db,
    sql`with seen as (
          select * from json_to_recordset(${JSON.stringify(seen)}::json)
            as s(tx_id uuid, passed boolean, restart boolean)),
        marked as (
          update outgoing_transactions t
          set nonce_passed_at = case when not s.passed then null when s.restart then now()
            else coalesce(t.nonce_passed_at, now()) end
          from seen s
          where t.tx_id = s.tx_id and t.status in ('signed', 'submitted')
            and ((t.nonce_passed_at is null) = s.passed or (s.passed and s.restart))
          returning t.tx_id)
        select t.tx_id, t.nonce from outgoing_transactions t join seen s on s.tx_id = t.tx_id
        where s.passed and not s.restart and t.status in ('signed', 'submitted')
          and t.nonce_passed_at < now() - make_interval(secs => ${decideAfterMs / 1000})`,
  );
  await deps.store.failInFlight(
    deps.db,
    due.map((row) => ({
      txId: row.tx_id,
      error: `its nonce ${row.nonce} was taken by a transaction the service did not sign, mined instead`,
    })),
  );
  return due.length;
}
