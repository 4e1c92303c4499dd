-- The amounts money counts on can no longer be negative in the database, as agent_actions' and
-- transfer_daily_spend's spent units already could not: a settlement's and its reservation's
-- units, an outgoing transaction's nonce, most cost and fee, and the daily counters' other
-- columns. Code never wrote one; a row that did (a bug, a hand edit) would lower an in-flight sum,
-- a reservation or a day's total and let more money out than the balance or limit allows.
-- Then the console's lists of actions and identities, newest first, get an index in their order:
-- each page read the whole table and sorted it (origin/console/browse-pages-plan.int.test.ts).
ALTER TABLE "transfer_daily_spend" ADD CONSTRAINT "transfer_daily_spend_transfers_nonnegative" CHECK ("transfer_daily_spend"."transfers" >= 0);--> statement-breakpoint
ALTER TABLE "x402_daily_authorizations" ADD CONSTRAINT "x402_daily_authorizations_units_nonnegative" CHECK ("x402_daily_authorizations"."units" >= 0);--> statement-breakpoint
ALTER TABLE "outgoing_transactions" ADD CONSTRAINT "outgoing_transactions_amounts_nonnegative" CHECK ("outgoing_transactions"."nonce" >= 0 AND "outgoing_transactions"."max_cost_wei" >= 0 AND ("outgoing_transactions"."fee_wei" IS NULL OR "outgoing_transactions"."fee_wei" >= 0));--> statement-breakpoint
ALTER TABLE "x402_reservations" ADD CONSTRAINT "x402_reservations_amount_nonnegative" CHECK ("x402_reservations"."amount_units" >= 0);--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD CONSTRAINT "x402_settlements_amount_nonnegative" CHECK ("x402_settlements"."amount_units" >= 0);--> statement-breakpoint
CREATE INDEX "agent_actions_created_idx" ON "agent_actions" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "agent_identities_created_idx" ON "agent_identities" USING btree ("created_at");