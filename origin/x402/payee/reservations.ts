/**
 * What a payer's balance must still cover before one more of its payments settles: every other
 * settlement of the payer that is claimed or signed but not yet in the balance the chain showed
 * (x402_settlements). Without it, N payments against a balance covering two each see the same
 * balance, and N - 2 of them revert on chain at the settler's expense.
 *
 * The settle batch reads the chain's block number and then the balances, in one JSON-RPC batch
 * that the node answers in order, so the balances are of that block or a later one. A settlement
 * counts unless that balance surely holds it already: mined (its receipt recorded, or read now
 * from the chain) in that block or before, or reverted (it moved nothing). One mined in between
 * counts twice, a refusal too many, never an overdraft. One whose validBefore has passed by more
 * than the margin can no longer move money, and is not read.
 *
 * The settlements read are kept apart from x402_settlements, in x402_reservations (written by the
 * claim, the store and the outbox followers, outbox-follower.ts), and found through (payer,
 * settled_block): those in flight, and those mined after the balance's block. A payer's earlier
 * settlements, mined at or before it, are not visited, however many are still in their window.
 */
import { sql } from "drizzle-orm";
import type { Hex } from "../../../shared/hex.ts";
import type { JsonRpcUpstream } from "../../chain/json-rpc-upstream.ts";
import { type Db, pgArrayLiteral } from "../../db/client.ts";
import type { PipelinedTransaction } from "../../db/pipelined-transaction.ts";
import { preparedStatement, runPrepared } from "../../db/prepared.ts";
import { readReceipts } from "../../outbox/index.ts";

export type ReservedUnitsParams = {
  payers: readonly string[];
  /** Claims of the batch asking: it counts those itself, in its own order. */
  excludeIds: readonly string[];
  /** The block the balances were read at, or before: settlements mined after it are not in them. */
  balanceBlock: bigint;
  /** Settlements valid until this time or earlier (unix seconds) can no longer settle. */
  openAfterSeconds: bigint;
};

type ReservedParam = "payers" | "openAfter" | "excludeIds" | "balanceBlock";

/**
 * Past this many seconds after its authorization's validBefore a reservation is swept: more than
 * the largest validity margin the origin accepts (AGENT_X402_VALIDITY_MARGIN_SECONDS, at most 600),
 * with room for origins whose clocks disagree, so no read would still count it.
 */
export const RESERVATION_SWEEP_AFTER_SECONDS = 3_600;

/**
 * A CTE for the claim statement (settle.ts): up to 200 reservations expired past the sweep, taken
 * in validBefore order through its index, skipping rows another batch is sweeping or holds.
 */
export const sweepExpiredReservations = sql`swept as (
      delete from x402_reservations where settlement_id in (
        select settlement_id from x402_reservations
        where valid_before < extract(epoch from now())::bigint - ${RESERVATION_SWEEP_AFTER_SECONDS}
        order by valid_before limit 200 for update skip locked))`;

// In the settle batch's pipelined transaction (outbox/submit.ts), so a named statement. Two
// branches, each one range of the (payer, settled_block) index: in flight, and mined after the
// balance's block. Only a settlement in flight needs its validity: one that has expired can no
// longer be mined. One mined after the balance's block has moved its money whatever its validity
// now, and with the validity in that branch too, a generic plan made on an analyzed table read the
// branch through the validity index instead: every payer's settlements still valid, not this
// batch's payers' few (prepared.int.test.ts).
export const reservedStatement = preparedStatement<ReservedParam>(
  "x402_reserved_units",
  sql`select r.payer, r.amount_units::text as units, false as mined, r.tx_hash
      from x402_reservations r
      where r.payer = any(${sql.placeholder("payers")}::text[]) and r.settled_block is null
        and r.valid_before > ${sql.placeholder("openAfter")}::bigint
        and not (r.settlement_id = any(${sql.placeholder("excludeIds")}::uuid[]))
      union all
      select r.payer, r.amount_units::text, true, r.tx_hash
      from x402_reservations r
      where r.payer = any(${sql.placeholder("payers")}::text[])
        and r.settled_block > ${sql.placeholder("balanceBlock")}::bigint
        and not (r.settlement_id = any(${sql.placeholder("excludeIds")}::uuid[]))`,
).returns({ payer: "text", units: "text", mined: "bool", tx_hash: "text?" });

/**
 * Units each payer's other settlements hold, by payer (absent: none). For the settle batch, which
 * calls it after taking the settler's nonce row lock: every batch that signed before it has
 * committed by then, whichever origin ran it, and none signs until it has. A settlement signed
 * but with no receipt recorded yet (the batch before this one may be recording it right now) is
 * looked up on the chain, in one JSON-RPC batch, only when there is one.
 */
export async function reservedUnits(
  run: PipelinedTransaction["run"],
  rpc: JsonRpcUpstream,
  params: ReservedUnitsParams,
): Promise<Map<string, bigint>> {
  const reserved = new Map<string, bigint>();
  if (params.payers.length === 0) return reserved;
  const rows = await run(reservedStatement, {
    payers: pgArrayLiteral(params.payers),
    openAfter: params.openAfterSeconds.toString(),
    excludeIds: pgArrayLiteral(params.excludeIds),
    balanceBlock: params.balanceBlock.toString(),
  });
  const unrecorded = rows.filter((row) => !row.mined && row.tx_hash !== null);
  // None when the chain does not answer: then each counts.
  const receipts = await readReceipts(
    rpc,
    unrecorded.map((row) => row.tx_hash as Hex),
  );
  for (const row of rows) {
    const receipt = row.tx_hash === null ? undefined : receipts.get(row.tx_hash);
    if (receipt && (receipt.status === "reverted" || receipt.blockNumber <= params.balanceBlock)) continue;
    reserved.set(row.payer, (reserved.get(row.payer) ?? 0n) + BigInt(row.units));
  }
  return reserved;
}

export type VerifyReservation = { claimed: boolean; reservedUnits: bigint };

/** What verifyReservation reads, in one statement (by name: every /verify runs it). */
export const verifyReservationStatement = preparedStatement<"payer" | "nonce" | "openAfter">(
  "x402_verify_reservation",
  sql`with this as (
        select id from x402_settlements
        where payer = ${sql.placeholder("payer")} and nonce = ${sql.placeholder("nonce")})
      select exists (select 1 from this) as claimed,
        coalesce((select sum(r.amount_units) from x402_reservations r
          where r.payer = ${sql.placeholder("payer")} and r.settled_block is null
            and r.valid_before > ${sql.placeholder("openAfter")}::bigint
            and r.settlement_id not in (select id from this)), 0)::text as units`,
).returns({ claimed: "bool", units: "text" });

/**
 * For /verify, in one statement: whether (payer, nonce) is claimed here already, and what the
 * payer's settlements not yet mined hold. Verify reads the balance without a block number, so
 * settlements already mined count as in it.
 */
export async function verifyReservation(
  db: Db,
  params: { payer: string; nonce: string; openAfterSeconds: bigint },
): Promise<VerifyReservation> {
  const [row] = await runPrepared(db, verifyReservationStatement, {
    payer: params.payer,
    nonce: params.nonce,
    openAfter: params.openAfterSeconds.toString(),
  });
  return { claimed: row?.claimed ?? false, reservedUnits: BigInt(row?.units ?? "0") };
}
