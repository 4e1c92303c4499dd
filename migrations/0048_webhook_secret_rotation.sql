-- Rotating an endpoint's HMAC secret (docs/operations.md#webhooks): the secret it replaced keeps
-- signing beside the new one until previous_secret_until, so a receiver switches over without a
-- delivery it cannot verify; the rotation is recorded as the other endpoint changes are.
ALTER TABLE "webhook_endpoint_changes" DROP CONSTRAINT "webhook_endpoint_changes_change_enum";--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ADD COLUMN "previous_secret" text;--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ADD COLUMN "previous_secret_until" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "webhook_endpoint_changes" ADD CONSTRAINT "webhook_endpoint_changes_change_enum" CHECK ("webhook_endpoint_changes"."change" IN ('add','remove','replay','rotate_secret'));--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "webhook_endpoints_previous_secret_whole" CHECK (("webhook_endpoints"."previous_secret" IS NULL) = ("webhook_endpoints"."previous_secret_until" IS NULL));