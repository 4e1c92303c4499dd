CREATE TABLE "identity_changes" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"agent_id" uuid NOT NULL,
	"before_enabled" boolean NOT NULL,
	"after_enabled" boolean NOT NULL,
	"reason" text NOT NULL,
	"source" text NOT NULL,
	"changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "identity_changes_reason_nonempty" CHECK (length(trim("identity_changes"."reason")) > 0),
	CONSTRAINT "identity_changes_source_enum" CHECK ("identity_changes"."source" IN ('console','cli'))
);
--> statement-breakpoint
ALTER TABLE "identity_changes" ADD CONSTRAINT "identity_changes_agent_id_agent_identities_agent_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agent_identities"("agent_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "identity_changes_changed_idx" ON "identity_changes" USING btree ("changed_at");