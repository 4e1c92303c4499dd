CREATE TABLE "operator_sessions" (
	"token_hash" text PRIMARY KEY NOT NULL,
	"operator" text NOT NULL,
	"key_id" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"ended_at" timestamp with time zone,
	CONSTRAINT "operator_sessions_token_hash_format" CHECK ("operator_sessions"."token_hash" ~ '^[0-9a-f]{64}$')
);
--> statement-breakpoint
ALTER TABLE "identity_changes" ADD COLUMN "operator" text;--> statement-breakpoint
ALTER TABLE "identity_changes" ADD COLUMN "passkey_key_id" text;--> statement-breakpoint
ALTER TABLE "operator_passkeys" ADD COLUMN "sign_count" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "registration_policy_changes" ADD COLUMN "operator" text;--> statement-breakpoint
ALTER TABLE "registration_policy_changes" ADD COLUMN "passkey_key_id" text;--> statement-breakpoint
ALTER TABLE "webhook_endpoint_changes" ADD COLUMN "operator" text;--> statement-breakpoint
ALTER TABLE "webhook_endpoint_changes" ADD COLUMN "passkey_key_id" text;--> statement-breakpoint
CREATE INDEX "operator_sessions_expires_idx" ON "operator_sessions" USING btree ("expires_at");--> statement-breakpoint
ALTER TABLE "identity_changes" ADD CONSTRAINT "identity_changes_operator_whole" CHECK (("identity_changes"."operator" IS NULL) = ("identity_changes"."passkey_key_id" IS NULL));--> statement-breakpoint
ALTER TABLE "registration_policy_changes" ADD CONSTRAINT "registration_policy_changes_operator_whole" CHECK (("registration_policy_changes"."operator" IS NULL) = ("registration_policy_changes"."passkey_key_id" IS NULL));--> statement-breakpoint
ALTER TABLE "webhook_endpoint_changes" ADD CONSTRAINT "webhook_endpoint_changes_operator_whole" CHECK (("webhook_endpoint_changes"."operator" IS NULL) = ("webhook_endpoint_changes"."passkey_key_id" IS NULL));