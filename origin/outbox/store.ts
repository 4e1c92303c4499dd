/**
 * The outbox's rows (docs/architecture.md): nonces handed out under a row lock per sending address
 * (batch.ts), signed bytes stored before they are broadcast, broadcast leases so no two origins send one transaction
 * at once, and each state the chain moves a transaction to, written with the state of the domain
 * row that follows it (an agent action, an x402 settlement) in the same statement.
 */
import { type SQL, sql } from "drizzle-orm";
import { type Db, pgArrayLiteral, queryRows } from "../db/client.ts";
import { type PreparedStatement, preparedStatement, runPrepared } from "../db/prepared.ts";
import { followersTail } from "./followers.ts";
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
 * Claims a stored transaction for broadcasting: only one origin at a time, and only when nobody
 * holds its lease. `resend` also takes `submitted` ones (a node may drop a pending transaction).
 */
export async function claimBroadcast(
  db: Db,
  txId: string,
  options: { leaseMs: number; resend?: boolean },
): Promise<BroadcastLease | undefined> {
  const statuses = options.resend ? ["signed", "submitted"] : ["signed"];
  const [row] = await queryRows<{ raw_tx: string; tx_hash: string; status: TxStatus }>(
    db,
    sql`update outgoing_transactions set broadcast_lease_until = now() + make_interval(secs => ${options.leaseMs / 1000})
        where tx_id = ${txId} and status = any(${pgArrayLiteral(statuses)}::text[])
          and (broadcast_lease_until is null or broadcast_lease_until < now())
        returning raw_tx, tx_hash, status`,
  );
  return row ? { txId, rawTx: row.raw_tx, txHash: row.tx_hash, status: row.status } : undefined;
}

/**
 * Records how the chain took a batch of broadcasts, ending their leases: accepted ones become
 * `submitted` together, transient ones wait for the tracker, refused ones end `failed` (each
 * handing its nonce out again if nothing came after it).
 */
export async function recordBroadcastOutcomes(
  db: Db,
  leases: readonly BroadcastLease[],
  outcomes: readonly BroadcastOutcome[],
): Promise<void> {
  const accepted = leases.filter((_, n) => outcomes[n]!.kind === "accepted").map((lease) => lease.txId);
  await setTxStatus(db, accepted, "submitted", { countBroadcast: true, chainCanTell: true });
  const transient = leases.filter((_, n) => outcomes[n]!.kind === "transient").map((lease) => lease.txId);
  if (transient.length > 0) {
    await db.execute(sql`update outgoing_transactions
        set broadcast_attempts = broadcast_attempts + 1, error = 'chain unavailable', updated_at = now(),
            broadcast_lease_until = null
        where tx_id = any(${pgArrayLiteral(transient)}::uuid[])`);
  }
  for (const [n, lease] of leases.entries()) {
    const outcome = outcomes[n]!;
    if (outcome.kind !== "refused") continue;
    await db.transaction(async (tx) => {
      await setTxStatus(tx, [lease.txId], "failed", { error: outcome.reason, countBroadcast: true });
      await releaseNonceIfLast(tx, lease.txId);
    });
  }
}

/**
 * A CTE for a one-statement write the chain can tell again (a broadcast accepted, a receipt): its
 * commit does not wait for the WAL flush (synchronous_commit off, for its own transaction only), a
 * wait in every settlement's and transfer's path that such a write does not need. Postgres still
 * writes the WAL within its walwriter delay, and any later synchronous commit flushes this one with
 * it (the WAL is one sequence), so only a crash of the database itself in that moment can lose it;
 * the row then stays `signed` or `submitted` and the tracker finds the same facts on chain again (a
 * resend of the same bytes is "already known" or mined). The statement must read the CTE for it to
 * run.
 */
const NO_FLUSH_WAIT = sql`no_flush_wait as materialized (
  select set_config('synchronous_commit', 'off', true) as setting)`;

/**
 * Moves transactions (and the domain rows that follow them, followers.ts) to `status`, ending any
 * broadcast lease, in one statement, so a reader never sees them differ.
 */
export async function setTxStatus(
  db: Db,
  txIds: string[],
  status: TxStatus,
  fields: { error?: string | null; countBroadcast?: boolean; chainCanTell?: boolean } = {},
): Promise<void> {
  if (txIds.length === 0) return;
  const refusal = status === "failed" && fields.error ? fields.error : null;
  // Locked in tx_id order first, as recordMined does, so the two never deadlock on shared rows.
  const flushWait = fields.chainCanTell
    ? { cte: sql`${NO_FLUSH_WAIT},`, read: sql`, no_flush_wait` }
    : { cte: sql``, read: sql`` };
  await db.execute(sql`
    with ${flushWait.cte}
    locked as materialized (
      select tx_id from outgoing_transactions${flushWait.read}
      where tx_id = any(${pgArrayLiteral(txIds)}::uuid[])
      order by tx_id for update),
    moved as (
      update outgoing_transactions
      set status = ${status}, updated_at = now(), broadcast_lease_until = null,
          error = coalesce(${fields.error ?? null}::text, error),
          broadcast_attempts = broadcast_attempts + ${fields.countBroadcast ? 1 : 0}
      where tx_id in (select tx_id from locked)
      returning tx_id)${followersTail((follower) => follower.moved(status, refusal))}`);
}

/**
 * Records receipts in bulk: transactions and the domain rows that follow them (followers.ts), one
 * statement for all. `broadcast`: the caller holds these transactions' broadcast leases and has
 * just seen the chain accept them, so a transaction still `signed` moves straight to its receipt's
 * state, its broadcast counted (one statement where recordBroadcastOutcomes and this would be two).
 */
export async function recordMined(
  db: Db,
  mined: MinedTransaction[],
  options: { broadcast?: boolean } = {},
): Promise<void> {
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
  await runPrepared(db, recordMinedFrom(options.broadcast === true), {
    receipts: JSON.stringify(receipts),
  });
}

/**
 * recordMined's statement for transactions still in one of `from`. The rows are locked one by one
 * in the order given (tx_id order): a settle and a tracker (or two origins' trackers) recording
 * overlapping receipts at once then queue on the first shared row instead of each holding one the
 * other needs (a deadlock Postgres would end by failing one of them). Rows are found through their
 * keys, whatever the plan the statement was prepared with: a search by status would read the
 * in-flight index, whose entries for rows already confirmed stay until a vacuum, and a join with
 * the actions could scan them all (hundreds of pages a statement in bench:money, either way).
 */
function recordMinedStatement(name: string, from: SQL) {
  return preparedStatement<"receipts">(
    name,
    sql`
    with ${NO_FLUSH_WAIT},
    receipts as materialized (
      select * from json_to_recordset(${sql.placeholder("receipts")}::json)
        as r(tx_id uuid, status text, fee_wei numeric, block_number bigint)),
    locked as materialized (
      select t.tx_id from receipts r
      cross join lateral (select tx_id from outgoing_transactions t
        where t.tx_id = r.tx_id and t.status in ${from} for update) t
      cross join no_flush_wait),
    moved as (
      update outgoing_transactions t
      set status = r.status, fee_wei = r.fee_wei, block_number = r.block_number, updated_at = now(),
          broadcast_lease_until = null,
          broadcast_attempts = broadcast_attempts + (case when t.status = 'signed' then 1 else 0 end)
      from locked l join receipts r on r.tx_id = l.tx_id where t.tx_id = l.tx_id
      returning t.tx_id, t.status)${followersTail((follower) => follower.mined)}`,
  );
}

/** recordMined's two statements, built on first use, once every follower is registered. */
let recordMinedStatements:
  | { fromSigned: PreparedStatement<"receipts">; fromSubmitted: PreparedStatement<"receipts"> }
  | undefined;

function recordMinedFrom(broadcast: boolean): PreparedStatement<"receipts"> {
  recordMinedStatements ??= {
    fromSigned: recordMinedStatement("outgoing_record_mined_broadcast", sql`('signed', 'submitted')`),
    fromSubmitted: recordMinedStatement("outgoing_record_mined", sql`('submitted')`),
  };
  return broadcast ? recordMinedStatements.fromSigned : recordMinedStatements.fromSubmitted;
}

/**
 * A refused transaction leaves a hole at its nonce. If nothing was signed after it, the hole is
 * closed by handing the nonce out again (the refused row stays, out of the uniqueness rule of live
 * rows); otherwise the later transactions wait behind it, and the tracker fills it with a filler
 * (gaps.ts).
 */
export async function releaseNonceIfLast(tx: Db, txId: string): Promise<void> {
  await tx.execute(sql`
    update sender_nonces set next_nonce = t.nonce, updated_at = now()
    from outgoing_transactions t
    where t.tx_id = ${txId} and sender_nonces.address = t.sender and sender_nonces.next_nonce = t.nonce + 1`);
}
