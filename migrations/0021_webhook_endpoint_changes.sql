CREATE TABLE "webhook_endpoint_changes" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"endpoint_id" uuid NOT NULL,
	"change" text NOT NULL,
	"before" text,
	"after" text NOT NULL,
	"reason" text,
	"source" text NOT NULL,
	"changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "webhook_endpoint_changes_change_enum" CHECK ("webhook_endpoint_changes"."change" IN ('add','remove','replay')),
	CONSTRAINT "webhook_endpoint_changes_source_enum" CHECK ("webhook_endpoint_changes"."source" IN ('console','cli')),
	CONSTRAINT "webhook_endpoint_changes_reason_nonempty" CHECK ("webhook_endpoint_changes"."reason" IS NULL OR length(trim("webhook_endpoint_changes"."reason")) > 0)
);
--> statement-breakpoint
CREATE INDEX "webhook_endpoint_changes_changed_idx" ON "webhook_endpoint_changes" USING btree ("changed_at");