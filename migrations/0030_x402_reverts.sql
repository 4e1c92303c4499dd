-- Reverted settlements, as their receipts are recorded, for the revert guard (origin/x402/payee/revert-guard.ts),
-- which read them from x402_settlements through every settlement of the payer's last day.
CREATE TABLE "x402_reverts" (
	"settlement_id" uuid PRIMARY KEY NOT NULL,
	"payer" text NOT NULL,
	"reverted_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "x402_reverts" ADD CONSTRAINT "x402_reverts_settlement_id_x402_settlements_id_fk" FOREIGN KEY ("settlement_id") REFERENCES "public"."x402_settlements"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "x402_reverts_payer_at_idx" ON "x402_reverts" USING btree ("payer","reverted_at");--> statement-breakpoint
-- The settlements that reverted before this table: the revert guard counts them from here on.
INSERT INTO "x402_reverts" ("settlement_id", "payer", "reverted_at")
SELECT "id", "payer", "updated_at" FROM "x402_settlements" WHERE "status" = 'reverted';
