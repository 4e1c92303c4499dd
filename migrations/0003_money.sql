CREATE TABLE "funding_exception_changes" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"exception_id" uuid NOT NULL,
	"change" text NOT NULL,
	"before" jsonb,
	"after" jsonb NOT NULL,
	"reason" text NOT NULL,
	"changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "funding_exception_changes_change_enum" CHECK ("funding_exception_changes"."change" IN ('grant','revoke')),
	CONSTRAINT "funding_exception_changes_reason_nonempty" CHECK (length(trim("funding_exception_changes"."reason")) > 0)
);
--> statement-breakpoint
CREATE TABLE "outgoing_transactions" (
	"tx_id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"purpose" text NOT NULL,
	"sender" text NOT NULL,
	"nonce" bigint NOT NULL,
	"tx_hash" text NOT NULL,
	"raw_tx" text NOT NULL,
	"max_cost_wei" numeric(78, 0) NOT NULL,
	"status" text DEFAULT 'signed' NOT NULL,
	"fee_wei" numeric(78, 0),
	"block_number" bigint,
	"error" text,
	"broadcast_attempts" bigint DEFAULT 0 NOT NULL,
	"broadcast_lease_until" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "outgoing_transactions_tx_hash_unique" UNIQUE("tx_hash"),
	CONSTRAINT "outgoing_transactions_sender_nonce_uq" UNIQUE("sender","nonce"),
	CONSTRAINT "outgoing_transactions_purpose_enum" CHECK ("outgoing_transactions"."purpose" IN ('faucet','transfer','settlement','filler')),
	CONSTRAINT "outgoing_transactions_status_enum" CHECK ("outgoing_transactions"."status" IN ('signed','submitted','confirmed','reverted','failed')),
	CONSTRAINT "outgoing_transactions_sender_format" CHECK ("outgoing_transactions"."sender" ~ '^0x[0-9a-f]{40}$'),
	CONSTRAINT "outgoing_transactions_hash_format" CHECK ("outgoing_transactions"."tx_hash" ~ '^0x[0-9a-f]{64}$')
);
--> statement-breakpoint
CREATE TABLE "sender_nonces" (
	"address" text PRIMARY KEY NOT NULL,
	"next_nonce" bigint NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "sender_nonces_address_format" CHECK ("sender_nonces"."address" ~ '^0x[0-9a-f]{40}$'),
	CONSTRAINT "sender_nonces_next_nonce_nonnegative" CHECK ("sender_nonces"."next_nonce" >= 0)
);
--> statement-breakpoint
ALTER TABLE "agent_actions" ADD COLUMN "tx_id" uuid;--> statement-breakpoint
ALTER TABLE "agent_actions" ADD COLUMN "cost_units" numeric(78, 0);--> statement-breakpoint
ALTER TABLE "agent_actions" ADD COLUMN "signed_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "agent_actions" ADD COLUMN "error_message" text;--> statement-breakpoint
ALTER TABLE "funding_exception_changes" ADD CONSTRAINT "funding_exception_changes_exception_id_funding_exceptions_id_fk" FOREIGN KEY ("exception_id") REFERENCES "public"."funding_exceptions"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "funding_exception_changes_exception_idx" ON "funding_exception_changes" USING btree ("exception_id","changed_at");--> statement-breakpoint
CREATE INDEX "outgoing_transactions_in_flight_idx" ON "outgoing_transactions" USING btree ("status","updated_at") WHERE "outgoing_transactions"."status" IN ('signed','submitted');--> statement-breakpoint
ALTER TABLE "agent_actions" ADD CONSTRAINT "agent_actions_tx_id_outgoing_transactions_tx_id_fk" FOREIGN KEY ("tx_id") REFERENCES "public"."outgoing_transactions"("tx_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "agent_actions_requested_idx" ON "agent_actions" USING btree ("updated_at") WHERE "agent_actions"."status" = 'requested';--> statement-breakpoint
CREATE INDEX "agent_actions_tx_idx" ON "agent_actions" USING btree ("tx_id");--> statement-breakpoint
ALTER TABLE "agent_actions" ADD CONSTRAINT "agent_actions_cost_nonnegative" CHECK ("agent_actions"."cost_units" IS NULL OR "agent_actions"."cost_units" >= 0);