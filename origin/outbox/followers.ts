/**
 * The domain rows whose state follows an outgoing transaction's from `signed` on: an agent
 * action, an x402 settlement. Each domain defines its follower (actions/outbox-follower.ts,
 * x402/payee/outbox-follower.ts) and the composition root hands them to the outbox it builds
 * (outbox.ts); the outbox writes every follower's rows in the statement that moves the
 * transactions, so a reader never sees the two differ, and the outbox itself names no domain table.
 */
import { type SQL, sql } from "drizzle-orm";

export type TxFollower = {
  /** The follower's name in the statement (lowercase letters and underscores). */
  name: string;
  /**
   * An UPDATE (or INSERT, DELETE) of the follower's rows after their transactions moved: the
   * statement's CTE `moved` holds (tx_id, status, error, taken_by, block_number), status one of
   * `submitted` (a broadcast answered; error: the node's words, null when accepted), `confirmed`,
   * `reverted` (a receipt; block_number: the block it was mined in) or `failed` (another
   * transaction took the nonce; error: which, and the last broadcast's answer; taken_by: that
   * transaction's tx_id when it is the service's). block_number is null but for a receipt. The
   * follower must leave rows that have ended as they are.
   */
  moved: SQL;
};

/**
 * The tail of a statement whose CTE `moved` holds the transactions it moved: every follower's
 * update (the last one as the statement itself), or a bare select when there is none.
 */
export function followersTail(followers: readonly TxFollower[]): SQL {
  if (followers.length === 0) return sql`select 1 from moved`;
  const ctes = followers
    .slice(0, -1)
    .map((follower) => sql`, ${sql.raw(follower.name)} as (${follower.moved})`);
  return sql`${sql.join(ctes)}
    ${followers.at(-1)!.moved}`;
}
