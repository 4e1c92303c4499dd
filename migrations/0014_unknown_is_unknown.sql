ALTER TABLE "agent_actions" DROP CONSTRAINT "agent_actions_kind_enum";--> statement-breakpoint
DROP INDEX "outgoing_transactions_sender_nonce_live_uq";--> statement-breakpoint
DROP INDEX "outgoing_transactions_failed_idx";--> statement-breakpoint
ALTER TABLE "agent_actions" ADD COLUMN "last_broadcast_error" text;--> statement-breakpoint
ALTER TABLE "agent_actions" ADD COLUMN "replaced_by_action_id" uuid;--> statement-breakpoint
ALTER TABLE "outgoing_transactions" ADD COLUMN "broadcast_outcome" text;--> statement-breakpoint
ALTER TABLE "outgoing_transactions" ADD COLUMN "nonce_passed_at" timestamp with time zone;--> statement-breakpoint
CREATE UNIQUE INDEX "outgoing_transactions_sender_nonce_payment_uq" ON "outgoing_transactions" USING btree ("sender","nonce") WHERE "outgoing_transactions"."status" <> 'failed' AND "outgoing_transactions"."purpose" <> 'filler';--> statement-breakpoint
CREATE UNIQUE INDEX "outgoing_transactions_sender_nonce_filler_uq" ON "outgoing_transactions" USING btree ("sender","nonce") WHERE "outgoing_transactions"."status" <> 'failed' AND "outgoing_transactions"."purpose" = 'filler';--> statement-breakpoint
ALTER TABLE "agent_actions" ADD CONSTRAINT "agent_actions_kind_enum" CHECK ("agent_actions"."kind" IN ('faucet','transfer','x402','filler'));--> statement-breakpoint
ALTER TABLE "outgoing_transactions" ADD CONSTRAINT "outgoing_transactions_broadcast_outcome_enum" CHECK ("outgoing_transactions"."broadcast_outcome" IS NULL OR "outgoing_transactions"."broadcast_outcome" IN ('accepted','unknown','refused'));