ALTER TABLE "x402_settlements" DROP CONSTRAINT "x402_settlements_status_enum";--> statement-breakpoint
ALTER TABLE "x402_settlements" ALTER COLUMN "status" SET DEFAULT 'claimed';--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD COLUMN "payload_hash" text NOT NULL;--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD COLUMN "valid_after" bigint NOT NULL;--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD COLUMN "valid_before" bigint NOT NULL;--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD COLUMN "signature" text NOT NULL;--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD COLUMN "tx_id" uuid;--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD COLUMN "settler_nonce" bigint;--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD COLUMN "claimed_until" timestamp with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD CONSTRAINT "x402_settlements_tx_id_outgoing_transactions_tx_id_fk" FOREIGN KEY ("tx_id") REFERENCES "public"."outgoing_transactions"("tx_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "x402_settlements_tx_idx" ON "x402_settlements" USING btree ("tx_id");--> statement-breakpoint
CREATE INDEX "x402_settlements_status_idx" ON "x402_settlements" USING btree ("status");--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD CONSTRAINT "x402_settlements_payer_format" CHECK ("x402_settlements"."payer" ~ '^0x[0-9a-f]{40}$');--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD CONSTRAINT "x402_settlements_nonce_format" CHECK ("x402_settlements"."nonce" ~ '^0x[0-9a-f]{64}$');--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD CONSTRAINT "x402_settlements_status_enum" CHECK ("x402_settlements"."status" IN ('claimed','submitted','settled','failed','reverted'));