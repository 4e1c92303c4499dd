/**
 * The domain rows whose state follows an outgoing transaction's from `signed` on: an agent
 * action, an x402 settlement. Each domain registers its follower when its module loads
 * (actions/outbox-follower.ts, x402/outbox-follower.ts); the outbox writes every follower's rows
 * in the statement that moves the transactions, so a reader never sees the two differ, and the
 * outbox itself names no domain table.
 *
 * The statements are built on their first use, after every module has loaded, and their text is
 * then fixed (db/prepared.ts): a follower registered later would be left out, so registering one
 * then is a wiring mistake, refused at once.
 */
import { type SQL, sql } from "drizzle-orm";

export type TxFollower = {
  /** The follower's name in the statement (lowercase letters and underscores). */
  name: string;
  /**
   * An UPDATE of the follower's rows after their transactions moved: the statement's CTE `moved`
   * holds (tx_id, status, error, taken_by), status one of `submitted` (a broadcast answered; error:
   * the node's words, null when accepted), `confirmed`, `reverted` (a receipt) or `failed` (another
   * transaction took the nonce; error: which, and the last broadcast's answer; taken_by: that
   * transaction's tx_id when it is the service's). The follower must leave rows that have ended as
   * they are.
   */
  moved: SQL;
};

const followers: TxFollower[] = [];
let built = false;

/** Registers a domain's follower; call it when the domain's module loads. */
export function followOutgoing(follower: TxFollower): void {
  if (built) {
    throw new Error(`outbox follower "${follower.name}" registered after the outbox's statements were built`);
  }
  followers.push(follower);
}

/**
 * The tail of a statement whose CTE `moved` holds the transactions it moved: every follower's
 * update (the last one as the statement itself), or a bare select when none is registered.
 */
export function followersTail(): SQL {
  built = true;
  if (followers.length === 0) return sql`select 1 from moved`;
  const ctes = followers
    .slice(0, -1)
    .map((follower) => sql`, ${sql.raw(follower.name)} as (${follower.moved})`);
  return sql`${sql.join(ctes)}
    ${followers.at(-1)!.moved}`;
}
