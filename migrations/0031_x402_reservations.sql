CREATE TABLE "x402_reservations" (
	"settlement_id" uuid PRIMARY KEY NOT NULL,
	"payer" text NOT NULL,
	"amount_units" numeric(78, 0) NOT NULL,
	"valid_before" bigint NOT NULL,
	"tx_hash" text,
	"settled_block" bigint
);
--> statement-breakpoint
ALTER TABLE "x402_reservations" ADD CONSTRAINT "x402_reservations_settlement_id_x402_settlements_id_fk" FOREIGN KEY ("settlement_id") REFERENCES "public"."x402_settlements"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "x402_reservations_payer_block_idx" ON "x402_reservations" USING btree ("payer","settled_block");--> statement-breakpoint
CREATE INDEX "x402_reservations_valid_before_idx" ON "x402_reservations" USING btree ("valid_before");--> statement-breakpoint
-- What a payer's balance may not show yet, for the settle batch's reservations read
-- (origin/x402/payee/reservations.ts), which read it from x402_settlements through every settlement
-- of the payer still inside its validity window: the settlements in flight, and those mined whose
-- authorization has not been expired for the sweep's hour (older ones no read counts).
INSERT INTO "x402_reservations" ("settlement_id", "payer", "amount_units", "valid_before", "tx_hash", "settled_block")
SELECT x."id", x."payer", x."amount_units", x."valid_before", x."tx_hash",
  CASE WHEN x."status" = 'settled' THEN t."block_number" END
FROM "x402_settlements" x LEFT JOIN "outgoing_transactions" t ON t."tx_id" = x."tx_id"
WHERE x."status" IN ('claimed', 'submitted')
  OR (x."status" = 'settled' AND x."valid_before" > extract(epoch from now())::bigint - 3600);
