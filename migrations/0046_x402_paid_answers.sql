-- The paid answer a settlement owes (x402/payee/earlier-presentation.ts) moves out of
-- x402_settlements.retry_owed into its own narrow table. Taking it was an update of the settlement
-- row on every settle, which fired the table's statement triggers (its events, its state counts,
-- each with transition tables) for a change neither records: bench:x402 measured Postgres's CPU per
-- paid request nearly doubled by it. A row here is made once per settlement and only marked taken,
-- so a presentation answered pending after the answer was taken owes no second one.
CREATE TABLE "x402_paid_answers" (
	"settlement_id" uuid PRIMARY KEY NOT NULL,
	"taken_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "x402_paid_answers" ADD CONSTRAINT "x402_paid_answers_settlement_id_x402_settlements_id_fk" FOREIGN KEY ("settlement_id") REFERENCES "public"."x402_settlements"("id") ON DELETE cascade ON UPDATE no action;
--> statement-breakpoint
-- The answers owed so far move here; the column stays, owed and read only for a settlement that an
-- origin of the earlier version stores while the two versions run side by side.
INSERT INTO "x402_paid_answers" ("settlement_id") SELECT "id" FROM "x402_settlements" WHERE "retry_owed";
--> statement-breakpoint
UPDATE "x402_settlements" SET "retry_owed" = false WHERE "retry_owed";
