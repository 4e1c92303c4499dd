import { sql } from "drizzle-orm";
import {
  bigint,
  boolean,
  check,
  index,
  numeric,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uuid,
} from "drizzle-orm/pg-core";
import { LOWER_ADDRESS, LOWER_HASH, textFormat } from "./text-format.ts";
import { outgoingTransactions } from "./transactions.ts";

export { SETTLEMENT_STATES, type SettlementState } from "../../../shared/settlement-status.ts";

/**
 * A (from, nonce) pair settles once (docs/x402.md#the-demo-and-the-facilitator). The row is the
 * claim, inserted before anything is signed or broadcast, so concurrent settles of one payment make
 * one transaction; its transaction (outbox/store.ts) carries the settler nonce and moves this row's
 * state with its own.
 */
export const x402Settlements = pgTable(
  "x402_settlements",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    payer: text("payer").notNull(),
    nonce: text("nonce").notNull(),
    payTo: text("pay_to").notNull(),
    amountUnits: numeric("amount_units", { precision: 78, scale: 0 }).notNull(),
    /** SHA-256 of the canonical JSON of the accepted requirement. */
    requirementHash: text("requirement_hash").notNull(),
    /** SHA-256 of the canonical JSON of the payment payload (authorization and signature). */
    payloadHash: text("payload_hash").notNull(),
    /** The payer's authorization and signature, so a settle can be finished by whoever resumes it. */
    validAfter: bigint("valid_after", { mode: "bigint" }).notNull(),
    validBefore: bigint("valid_before", { mode: "bigint" }).notNull(),
    signature: text("signature").notNull(),
    /**
     * The resource the /settle request named (x402/payee/catalogue-entry.ts), listed by discovery
     * once this settlement is settled (x402/payee/catalogue-follower.ts); null for the demo's own
     * payments and for a resource the catalogue would refuse.
     */
    resourceUrl: text("resource_url"),
    resourceDescription: text("resource_description"),
    resourceMimeType: text("resource_mime_type"),
    status: text("status").notNull().default("claimed"),
    txId: uuid("tx_id").references(() => outgoingTransactions.txId),
    txHash: text("tx_hash"),
    settlerNonce: bigint("settler_nonce", { mode: "bigint" }),
    errorReason: text("error_reason"),
    /**
     * The paid answer owed as the origins before migration 0046 kept it (owed to the retry of a
     * presentation they answered pending); since then x402_paid_answers keeps it, and this is owed
     * and read only for a settlement an origin of the earlier version stored while the two ran side
     * by side (x402/payee/paid-answers.ts oweLegacyRetry).
     */
    retryOwed: boolean("retry_owed").notNull().default(false),
    /**
     * The `payment-identifier` id of the presentation that claimed this settlement (null: none):
     * a later presentation under the same id is the same request, answered as this settlement;
     * under another id, or none, it is told the nonce is used (x402/payee/earlier-presentation.ts).
     * The id is not signed, so only the claim can say which request the settlement was.
     */
    paymentId: text("payment_id"),
    /**
     * For a settlement that moved nothing (`failed`, `reverted`): whether the chain, when last
     * asked after it ended, held its authorization as used, by another relayer's transaction
     * (docs/x402.md#settlement-status). Null until asked; true is final (a used authorization stays
     * used); false may still turn true while the authorization is valid, and is final once read past
     * its validBefore and the validity margin, which moves updated_at to that read
     * (x402/payee/used-elsewhere.ts). Settlements that settle are never asked.
     */
    authorizationUsedElsewhere: boolean("authorization_used_elsewhere"),
    /** A claim older than this without a transaction was abandoned (a crash before signing). */
    claimedUntil: timestamp("claimed_until", { withTimezone: true }).notNull().defaultNow(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique("x402_settlements_payer_nonce_uq").on(t.payer, t.nonce),
    check(
      "x402_settlements_status_enum",
      sql`${t.status} IN ('claimed','submitted','settled','failed','reverted')`,
    ),
    check("x402_settlements_payer_format", textFormat(t.payer, LOWER_ADDRESS)),
    check("x402_settlements_nonce_format", textFormat(t.nonce, LOWER_HASH)),
    check("x402_settlements_amount_nonnegative", sql`${t.amountUnits} >= 0`),
    // No index on status: every settlement changes status twice, and an index on it kept each
    // change from being a HOT update and led the planner to scan its dead entries; the state
    // counts read the whole table anyway.
    index("x402_settlements_tx_idx").on(t.txId),
    // The console's time to settlement over the last hour (console/charts-queries.ts); created_at
    // never changes, so status changes stay HOT updates.
    index("x402_settlements_created_idx").on(t.createdAt),
  ],
);

/**
 * The one answer as paid a settlement owes, so that a seller delivers once for one payment
 * (docs/x402.md#the-demo-and-the-facilitator): made by the statement that stores the settlement
 * (x402/payee/settle.ts storeStatement), so no answer after that commit needs the database to keep
 * the promise, and taken (`taken_at`) by the one presentation of the same payload answered paid:
 * the one that settled it, or, where that one was answered otherwise (settlement_pending, a
 * database gone after the commit), a later one (x402/payee/earlier-presentation.ts). A row per
 * settlement, once: a taken answer is never owed again. Its own narrow table, without the
 * settlements' triggers, so that taking it costs a settle one small write.
 */
export const x402PaidAnswers = pgTable("x402_paid_answers", {
  settlementId: uuid("settlement_id")
    .primaryKey()
    .references(() => x402Settlements.id, { onDelete: "cascade" }),
  takenAt: timestamp("taken_at", { withTimezone: true }),
});

/**
 * Each settlement that reverted, as its receipt was recorded (x402/payee/outbox-follower.ts): what
 * the revert guard (x402/payee/revert-guard.ts) counts per payer within its window. Reverts are
 * rare, so the guard's read finds them here through the payer's few rows, where in
 * x402_settlements it visited every settlement of the payer's last day. Gone with its settlement.
 */
export const x402Reverts = pgTable(
  "x402_reverts",
  {
    settlementId: uuid("settlement_id")
      .primaryKey()
      .references(() => x402Settlements.id, { onDelete: "cascade" }),
    payer: text("payer").notNull(),
    revertedAt: timestamp("reverted_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [index("x402_reverts_payer_at_idx").on(t.payer, t.revertedAt)],
);

/**
 * Each settlement whose amount a payer's balance may not show yet (x402/payee/reservations.ts):
 * from its claim until it reverts or fails (it moved nothing: the row goes), and once mined with the
 * block it was mined in, since a balance read at an earlier block still lacks it. The settle
 * batch's reservations read finds a payer's rows still in flight or mined after its balance's
 * block through (payer, settled_block), where in x402_settlements it visited every settlement of
 * the payer still inside its validity window and joined each to its transaction. Rows whose
 * authorization expired long ago are swept (reservations.ts); a row goes with its settlement.
 */
export const x402Reservations = pgTable(
  "x402_reservations",
  {
    settlementId: uuid("settlement_id")
      .primaryKey()
      .references(() => x402Settlements.id, { onDelete: "cascade" }),
    payer: text("payer").notNull(),
    amountUnits: numeric("amount_units", { precision: 78, scale: 0 }).notNull(),
    validBefore: bigint("valid_before", { mode: "bigint" }).notNull(),
    /** Its transaction's hash once signed: one not yet recorded is looked up on the chain. */
    txHash: text("tx_hash"),
    /** The block its transaction was mined in; null while in flight. */
    settledBlock: bigint("settled_block", { mode: "bigint" }),
  },
  (t) => [
    // What a payer's other settlements hold back from its balance: a negative one would free it.
    check("x402_reservations_amount_nonnegative", sql`${t.amountUnits} >= 0`),
    index("x402_reservations_payer_block_idx").on(t.payer, t.settledBlock),
    index("x402_reservations_valid_before_idx").on(t.validBefore),
  ],
);

/**
 * A payment identifier (the x402 `payment-identifier` extension, docs/x402.md#payment-identifiers):
 * the id a payer gave one logical payment, bound to that payer and to the fingerprint of what it
 * pays for, and naming the settlement (the payer's nonce) that answers for it. Unique per payer:
 * another payer's id is another payment. Kept as long as settlements are.
 */
export const x402PaymentIds = pgTable(
  "x402_payment_ids",
  {
    payer: text("payer").notNull(),
    paymentId: text("payment_id").notNull(),
    /** SHA-256 of the canonical JSON of the resource URL and the accepted requirement. */
    fingerprint: text("fingerprint").notNull(),
    /** The authorization nonce whose settlement answers for this id. */
    nonce: text("nonce").notNull(),
    /** Until then, a presentation whose settlement is not claimed yet is taken to be in flight. */
    heldUntil: timestamp("held_until", { withTimezone: true }).notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: "x402_payment_ids_pk", columns: [t.payer, t.paymentId] }),
    check("x402_payment_ids_payer_format", textFormat(t.payer, LOWER_ADDRESS)),
    check(
      "x402_payment_ids_id_format",
      textFormat(t.paymentId, { chars: "[A-Za-z0-9_-]", count: [16, 128] }),
    ),
    check("x402_payment_ids_nonce_format", textFormat(t.nonce, LOWER_HASH)),
  ],
);
