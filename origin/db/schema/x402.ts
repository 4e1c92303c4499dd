import { sql } from "drizzle-orm";
import { check, numeric, pgTable, text, timestamp, unique, uuid } from "drizzle-orm/pg-core";

/** SPEC "x402 surfaces": a (from, nonce) pair settles once. */
export const x402Settlements = pgTable(
  "x402_settlements",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    payer: text("payer").notNull(),
    nonce: text("nonce").notNull(),
    payTo: text("pay_to").notNull(),
    amountUnits: numeric("amount_units", { precision: 78, scale: 0 }).notNull(),
    requirementHash: text("requirement_hash").notNull(),
    status: text("status").notNull().default("pending"),
    txHash: text("tx_hash"),
    errorReason: text("error_reason"),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    unique("x402_settlements_payer_nonce_uq").on(t.payer, t.nonce),
    check("x402_settlements_status_enum", sql`${t.status} IN ('pending','submitted','settled','failed')`),
  ],
);
