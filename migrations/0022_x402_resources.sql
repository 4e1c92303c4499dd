CREATE TABLE "x402_resources" (
	"url" text PRIMARY KEY NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"mime_type" text,
	"source" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "x402_resources_source_enum" CHECK ("x402_resources"."source" IN ('operator','settled')),
	CONSTRAINT "x402_resources_url_length" CHECK (length("x402_resources"."url") <= 2048),
	CONSTRAINT "x402_resources_description_length" CHECK (length("x402_resources"."description") <= 500),
	CONSTRAINT "x402_resources_mime_type_length" CHECK (length("x402_resources"."mime_type") <= 100)
);
--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD COLUMN "resource_url" text;--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD COLUMN "resource_description" text;--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD COLUMN "resource_mime_type" text;--> statement-breakpoint
CREATE INDEX "x402_resources_listing_idx" ON "x402_resources" USING btree ("created_at","url");