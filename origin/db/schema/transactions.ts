import { sql } from "drizzle-orm";
import {
  bigint,
  check,
  index,
  numeric,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from "drizzle-orm/pg-core";
import { LOWER_ADDRESS, LOWER_HASH, textFormat } from "./text-format.ts";

/**
 * The next nonce of each address the service sends from (agent wallets, the faucet
 * treasury, the settler). A row is locked while a transaction of its address is signed, so two
 * origins sharing the database never hand out one nonce twice.
 */
export const senderNonces = pgTable(
  "sender_nonces",
  {
    address: text("address").primaryKey(),
    nextNonce: bigint("next_nonce", { mode: "bigint" }).notNull(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check("sender_nonces_address_format", textFormat(t.address, LOWER_ADDRESS)),
    check("sender_nonces_next_nonce_nonnegative", sql`${t.nextNonce} >= 0`),
  ],
);

/**
 * Every transaction the service signs, stored before it is broadcast: a restart
 * rebroadcasts these bytes and never signs again. `signed → submitted → confirmed`, or `reverted`
 * (mined with status 0), or `failed`: proven never to be mined, because the sender's nonce went to
 * another transaction (docs/architecture.md#who-decides-a-transactions-end). A nonce of a sender
 * holds at most one payment (a transfer, a payout, a settlement) that is not `failed`, and at most
 * one filler that may replace it: a nonce is never handed out again, so no second payment is ever
 * signed while the first can still be mined.
 */
export const outgoingTransactions = pgTable(
  "outgoing_transactions",
  {
    txId: uuid("tx_id").primaryKey().defaultRandom(),
    purpose: text("purpose").notNull(),
    sender: text("sender").notNull(),
    nonce: bigint("nonce", { mode: "bigint" }).notNull(),
    txHash: text("tx_hash").notNull().unique(),
    rawTx: text("raw_tx").notNull(),
    /** Value plus gas limit × max fee per gas: the most it can take from its sender. */
    maxCostWei: numeric("max_cost_wei", { precision: 78, scale: 0 }).notNull(),
    status: text("status").notNull().default("signed"),
    feeWei: numeric("fee_wei", { precision: 78, scale: 0 }),
    blockNumber: bigint("block_number", { mode: "bigint" }),
    /** The last broadcast's answer, in the chain's words (null: accepted, or never sent). */
    error: text("error"),
    /**
     * How the last broadcast was answered: `accepted`, `unknown` (a timeout, a gateway error, "nonce
     * too low", "already known": the node may have taken it) or `refused` (a validation error
     * proving that node did not take these bytes); null before the first.
     */
    broadcastOutcome: text("broadcast_outcome"),
    /**
     * When the sender's mined nonce was first seen past this transaction's nonce while none of the
     * service's transactions at that nonce had a receipt; null otherwise.
     */
    noncePassedAt: timestamp("nonce_passed_at", { withTimezone: true }),
    broadcastAttempts: bigint("broadcast_attempts", { mode: "number" }).notNull().default(0),
    /** Whoever broadcasts holds this lease; nobody else sends the transaction before it ends. */
    broadcastLeaseUntil: timestamp("broadcast_lease_until", { withTimezone: true }),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("outgoing_transactions_sender_nonce_payment_uq")
      .on(t.sender, t.nonce)
      .where(sql`${t.status} <> 'failed' AND ${t.purpose} <> 'filler'`),
    uniqueIndex("outgoing_transactions_sender_nonce_filler_uq")
      .on(t.sender, t.nonce)
      .where(sql`${t.status} <> 'failed' AND ${t.purpose} = 'filler'`),
    check(
      "outgoing_transactions_purpose_enum",
      sql`${t.purpose} IN ('faucet','transfer','settlement','filler')`,
    ),
    check(
      "outgoing_transactions_status_enum",
      sql`${t.status} IN ('signed','submitted','confirmed','reverted','failed')`,
    ),
    check("outgoing_transactions_sender_format", textFormat(t.sender, LOWER_ADDRESS)),
    // Money's in-flight sum counts max_cost_wei against its sender's balance: never below zero.
    check(
      "outgoing_transactions_amounts_nonnegative",
      sql`${t.nonce} >= 0 AND ${t.maxCostWei} >= 0 AND (${t.feeWei} IS NULL OR ${t.feeWei} >= 0)`,
    ),
    check("outgoing_transactions_hash_format", textFormat(t.txHash, LOWER_HASH)),
    check(
      "outgoing_transactions_broadcast_outcome_enum",
      sql`${t.broadcastOutcome} IS NULL OR ${t.broadcastOutcome} IN ('accepted','unknown','refused')`,
    ),
    index("outgoing_transactions_in_flight_idx")
      .on(t.status, t.updatedAt)
      .where(sql`${t.status} IN ('signed','submitted')`),
  ],
);
