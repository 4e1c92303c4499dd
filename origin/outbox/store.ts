/**
 * The outbox's rows (docs/architecture.md): nonces handed out under a row lock per sending address
 * (batch.ts), signed bytes stored before they are broadcast, broadcast leases so no two origins send
 * one transaction at once, and each state the chain moves a transaction to, written with the state
 * of the domain rows that follow it (an agent action, an x402 settlement) in the same statement.
 *
 * A transaction leaves `signed` or `submitted` only for what the chain did: a receipt (`confirmed`,
 * `reverted`), or another transaction mined at its nonce (`failed`, written by the same statement
 * that records that one's receipt, or by decide.ts). No statement here moves a row that has ended,
 * and none hands a nonce out again.
 */
import { createHash } from "node:crypto";
import { type SQL, sql } from "drizzle-orm";
import { runByKey } from "../db/by-key.ts";
import { type Db, queryRows } from "../db/client.ts";
import { NO_FLUSH_WAIT } from "../db/no-flush-wait.ts";
import {
  MAX_STATEMENT_NAME,
  type NoColumns,
  type PreparedStatement,
  preparedStatement,
} from "../db/prepared.ts";
import { followersTail, type TxFollower } from "./followers.ts";
import type { BroadcastLease, BroadcastOutcome, MinedTransaction, TxStatus } from "./intent.ts";

/**
 * How long a broadcast lease lasts: longer than any one broadcast can take (three chain timeouts),
 * so a lease never ends while its broadcast is still in flight, and no two origins ever send one
 * transaction at the same time. A crashed broadcaster's lease simply runs out.
 */
export function broadcastLeaseMs(chainTimeoutMs: number): number {
  return Math.max(3_000, 3 * chainTimeoutMs);
}

/**
 * Claims a stored transaction still in flight for broadcasting (its first, or again): only one
 * origin at a time, and only when nobody holds its lease.
 */
export async function claimBroadcast(
  db: Db,
  txId: string,
  options: { leaseMs: number },
): Promise<BroadcastLease | undefined> {
  const [row] = await queryRows<{ raw_tx: string; tx_hash: string; status: TxStatus }>(
    db,
    sql`update outgoing_transactions set broadcast_lease_until = now() + make_interval(secs => ${options.leaseMs / 1000})
        where tx_id = ${txId} and status in ('signed', 'submitted')
          and (broadcast_lease_until is null or broadcast_lease_until < now())
        returning raw_tx, tx_hash, status`,
  );
  return row ? { txId, rawTx: row.raw_tx, txHash: row.tx_hash, status: row.status } : undefined;
}

// Writes the chain can tell again (a broadcast's answer, a receipt, a nonce taken) commit without
// waiting for the WAL flush (NO_FLUSH_WAIT), a wait in every settlement's and transfer's path: if a
// database crash loses one, the row stays `signed` or `submitted` and the tracker finds the same
// facts on chain again (a resend of the same bytes is "already known" or mined).

/** One move of an in-flight transaction that is not a receipt (see moveInFlight). */
type InFlightMove = {
  tx_id: string;
  status: "submitted" | "failed";
  /** The answer a broadcast got (with `submitted`): counted as an attempt. */
  outcome: BroadcastOutcome["kind"] | null;
  /** The chain's words, or why the transaction failed; null clears it (an accepted broadcast). */
  error: string | null;
};

/**
 * Moves transactions still in flight, with the domain rows that follow them (followers.ts), in one
 * statement, so a reader never sees the two differ. A transaction's `nonce_passed_at` is left as it
 * is: only a read of the chain's nonce sets or clears it (decide.ts), and a broadcast proves nothing
 * about the nonce (a resend of a transaction whose nonce another took is answered "nonce too low"
 * every few seconds, and clearing the mark on each would never let the chain's decision stand). Rows are locked one by one in tx_id order, as
 * recordMined locks them, so the two never wait on each other in a cycle; a row that has ended
 * meanwhile is left as it is.
 */
function moveInFlightStatement(followers: readonly TxFollower[]): PreparedStatement<"moves", NoColumns> {
  return preparedStatement<"moves">(
    statementName("outgoing_move_in_flight", followers),
    sql`
    with ${NO_FLUSH_WAIT},
    moves as materialized (
      select * from json_to_recordset(${sql.placeholder("moves")}::json)
        as m(tx_id uuid, status text, outcome text, error text)),
    locked as materialized (
      select t.tx_id from moves m
      cross join lateral (select tx_id from outgoing_transactions t
        where t.tx_id = m.tx_id and coalesce(t.status, '') in ('signed', 'submitted') for update) t
      cross join no_flush_wait),
    moved as (
      update outgoing_transactions t
      set status = m.status, error = m.error, updated_at = now(), broadcast_lease_until = null,
          broadcast_outcome = coalesce(m.outcome, t.broadcast_outcome),
          broadcast_attempts = broadcast_attempts + (case when m.outcome is null then 0 else 1 end)
      from locked l join moves m on m.tx_id = l.tx_id where t.tx_id = l.tx_id
      returning t.tx_id, t.status, t.error, null::uuid as taken_by, null::bigint as block_number)${followersTail(followers)}`,
  ).returns({});
}

/**
 * What the outbox writes as the chain moves its transactions, with the domain rows that follow them
 * (followers.ts) in the same statements. Built once per outbox (outbox.ts), from the followers its
 * composition hands it.
 */
export type OutboxStore = {
  /**
   * Records how nodes answered broadcasts, ending their leases: each becomes (or stays)
   * `submitted`, with the answer's class and words (null words for an accepted one). Whatever the
   * answer, the transaction stays in flight: a refusal proves only that the node that answered did
   * not take the bytes, and an unknown answer not even that.
   */
  recordBroadcasts(
    db: Db,
    leases: readonly BroadcastLease[],
    outcomes: readonly BroadcastOutcome[],
  ): Promise<void>;
  /**
   * Ends transactions `failed`, with why: for decide.ts, once the chain has mined another
   * transaction at their nonce and none of the service's there.
   */
  failInFlight(db: Db, failures: readonly { txId: string; error: string }[]): Promise<void>;
  /**
   * Records receipts in bulk: transactions and the domain rows that follow them, one statement for
   * all. In the same statement, every other transaction of the service at a mined one's (sender,
   * nonce) ends `failed`, naming the one mined there: the chain has decided that nonce, so none of
   * them can be mined any more (docs/architecture.md#who-decides-a-transactions-end).
   * `broadcast`: the caller holds these transactions' broadcast leases and has just sent them, so a
   * transaction still `signed` moves straight to its receipt's state, its broadcast counted.
   */
  recordMined(db: Db, mined: readonly MinedTransaction[], options?: { broadcast?: boolean }): Promise<void>;
};

/** The store's named statements for `followers` (db/prepared.ts); none of them returns a row read. */
export function outboxStoreStatements(followers: readonly TxFollower[]): {
  minedFromSigned: PreparedStatement<"receipts", NoColumns>;
  minedFromSubmitted: PreparedStatement<"receipts", NoColumns>;
  moveInFlight: PreparedStatement<"moves", NoColumns>;
} {
  return {
    minedFromSigned: recordMinedStatement(
      "outgoing_record_mined_broadcast",
      sql`('signed', 'submitted')`,
      followers,
    ),
    minedFromSubmitted: recordMinedStatement("outgoing_record_mined", sql`('submitted')`, followers),
    moveInFlight: moveInFlightStatement(followers),
  };
}

export function createOutboxStore(followers: readonly TxFollower[]): OutboxStore {
  const statements = outboxStoreStatements(followers);
  const moveInFlight = async (db: Db, moves: InFlightMove[]): Promise<void> => {
    if (moves.length === 0) return;
    const sorted = [...moves].sort((a, b) => (a.tx_id < b.tx_id ? -1 : 1));
    await runByKey(db, statements.moveInFlight, { moves: JSON.stringify(sorted) });
  };
  return {
    recordBroadcasts: (db, leases, outcomes) =>
      moveInFlight(
        db,
        leases.map((lease, n) => {
          const outcome = outcomes[n]!;
          return {
            tx_id: lease.txId,
            status: "submitted",
            outcome: outcome.kind,
            error: outcome.kind === "accepted" ? null : outcome.reason,
          };
        }),
      ),
    failInFlight: (db, failures) =>
      moveInFlight(
        db,
        failures.map((failure) => ({
          tx_id: failure.txId,
          status: "failed",
          outcome: null,
          error: failure.error,
        })),
      ),
    async recordMined(db, mined, options = {}) {
      if (mined.length === 0) return;
      // In tx_id order: the statement locks them in the order given.
      const receipts = [...mined]
        .sort((a, b) => (a.txId < b.txId ? -1 : 1))
        .map((item) => ({
          tx_id: item.txId,
          status: item.status,
          fee_wei: item.feeWei.toString(),
          block_number: item.blockNumber.toString(),
        }));
      const statement = options.broadcast ? statements.minedFromSigned : statements.minedFromSubmitted;
      await runByKey(db, statement, { receipts: JSON.stringify(receipts) });
    },
  };
}

/**
 * A statement's name for one set of followers: its text carries their updates, and a connection
 * holds one text per name, so two outboxes of one process with other followers (tests compose
 * origins with and without some) never share a name. A name that would pass the length Postgres
 * keeps (db/prepared.ts) names the followers by a hash of their names instead.
 */
function statementName(base: string, followers: readonly TxFollower[]): string {
  if (followers.length === 0) return base;
  const names = followers.map((follower) => follower.name).join("_");
  const name = `${base}__${names}`;
  return name.length <= MAX_STATEMENT_NAME
    ? name
    : `${base}__${createHash("sha256").update(names).digest("hex").slice(0, 16)}`;
}

/**
 * recordMined's statement for transactions still in one of `from`. The rows are locked one by one
 * in the order given (tx_id order): a settle and a tracker (or two origins' trackers) recording
 * overlapping receipts at once then queue on the first shared row instead of each holding one the
 * other needs (a deadlock Postgres would end by failing one of them). Rows are found through their
 * keys, whatever the plan the statement was prepared with: a search by status would read the
 * in-flight index, whose entries for rows already confirmed stay until a vacuum, and a join with
 * the actions could scan them all (hundreds of pages a statement in bench:money, either way). The
 * status is checked as `coalesce(t.status, '')` (never null: the same test) wherever a row is
 * locked by its key: on the bare column the planner may prove the in-flight index's predicate and
 * read the index by status, filtering every entry by key, which the plan made on a new node's
 * empty tables did for receipts of submitted transactions.
 */
function recordMinedStatement(
  name: string,
  from: SQL,
  followers: readonly TxFollower[],
): PreparedStatement<"receipts", NoColumns> {
  return preparedStatement<"receipts">(
    statementName(name, followers),
    sql`
    with ${NO_FLUSH_WAIT},
    receipts as materialized (
      select * from json_to_recordset(${sql.placeholder("receipts")}::json)
        as r(tx_id uuid, status text, fee_wei numeric, block_number bigint)),
    locked as materialized (
      select t.tx_id from receipts r
      cross join lateral (select tx_id from outgoing_transactions t
        where t.tx_id = r.tx_id and coalesce(t.status, '') in ${from} for update) t
      cross join no_flush_wait),
    mined as (
      update outgoing_transactions t
      set status = r.status, fee_wei = r.fee_wei, block_number = r.block_number, updated_at = now(),
          broadcast_lease_until = null, nonce_passed_at = null,
          broadcast_attempts = broadcast_attempts + (case when t.status = 'signed' then 1 else 0 end)
      from locked l join receipts r on r.tx_id = l.tx_id where t.tx_id = l.tx_id
      returning t.tx_id, t.status, t.sender, t.nonce, t.purpose, t.tx_hash, t.block_number),
    siblings as materialized (
      -- The payment and the filler at each mined one's nonce, each found through its own index
      -- (two probes a receipt, whatever else is in flight), but for the mined ones themselves.
      select s.tx_id, m.tx_id as taken_by, m.purpose as taken_purpose, m.tx_hash as taken_hash from mined m
      cross join lateral (
        select p.tx_id from outgoing_transactions p where p.sender = m.sender and p.nonce = m.nonce
          and p.status <> 'failed' and p.purpose <> 'filler'
        union all
        select f.tx_id from outgoing_transactions f where f.sender = m.sender and f.nonce = m.nonce
          and f.status <> 'failed' and f.purpose = 'filler') s
      where not (s.tx_id in (select tx_id from locked))),
    -- Locked through their keys, still in flight, as the receipts rows are (see above).
    siblings_locked as materialized (
      select t.tx_id, s.taken_by, s.taken_purpose, s.taken_hash from siblings s
      cross join lateral (select tx_id from outgoing_transactions t
        where t.tx_id = s.tx_id and coalesce(t.status, '') in ('signed', 'submitted') for update) t),
    superseded as (
      update outgoing_transactions o
      set status = 'failed', updated_at = now(), broadcast_lease_until = null,
          error = 'its nonce ' || o.nonce || ' went to ' || s.taken_purpose || ' ' || s.taken_hash
            || coalesce(', mined instead (its last broadcast was answered: ' || o.error || ')', ', mined instead')
      from siblings_locked s
      where o.tx_id = s.tx_id
      returning o.tx_id, o.status, o.error, s.taken_by),
    moved as (
      select tx_id, status, null::text as error, null::uuid as taken_by, block_number from mined
      union all select tx_id, status, error, taken_by, null::bigint from superseded)${followersTail(followers)}`,
  ).returns({});
}
