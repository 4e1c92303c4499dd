CREATE TABLE "agent_policies" (
	"agent_id" uuid PRIMARY KEY NOT NULL,
	"policy" jsonb NOT NULL,
	"version" integer NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "agent_policies_version_positive" CHECK ("agent_policies"."version" > 0)
);
--> statement-breakpoint
CREATE TABLE "node_policy" (
	"id" smallint PRIMARY KEY DEFAULT 1 NOT NULL,
	"frozen" boolean DEFAULT false NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "node_policy_singleton" CHECK ("node_policy"."id" = 1)
);
--> statement-breakpoint
CREATE TABLE "policy_changes" (
	"change_id" bigserial PRIMARY KEY NOT NULL,
	"agent_id" uuid,
	"changed_by" text NOT NULL,
	"operator_key_id" text,
	"before" jsonb,
	"after" jsonb,
	"changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "policy_changes_changed_by_enum" CHECK ("policy_changes"."changed_by" IN ('agent','operator','admin'))
);
--> statement-breakpoint
CREATE TABLE "x402_daily_payee_units" (
	"agent_id" uuid NOT NULL,
	"day" date NOT NULL,
	"pay_to" text NOT NULL,
	"units" numeric(78, 0) NOT NULL,
	CONSTRAINT "x402_daily_payee_units_pk" PRIMARY KEY("agent_id","day","pay_to"),
	CONSTRAINT "x402_daily_payee_units_nonnegative" CHECK ("x402_daily_payee_units"."units" >= 0)
);
--> statement-breakpoint
ALTER TABLE "agent_actions" DROP CONSTRAINT "agent_actions_status_enum";--> statement-breakpoint
ALTER TABLE "agent_actions" ADD COLUMN "hold_rule" text;--> statement-breakpoint
ALTER TABLE "agent_actions" ADD COLUMN "hold_expires_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "transfer_daily_spend" ADD COLUMN "transfers" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "x402_daily_authorizations" ADD COLUMN "units" numeric(78, 0) DEFAULT '0' NOT NULL;--> statement-breakpoint
ALTER TABLE "agent_policies" ADD CONSTRAINT "agent_policies_agent_id_agent_identities_agent_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agent_identities"("agent_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "policy_changes" ADD CONSTRAINT "policy_changes_agent_id_agent_identities_agent_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agent_identities"("agent_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "policy_changes_agent_idx" ON "policy_changes" USING btree ("agent_id","changed_at");--> statement-breakpoint
CREATE INDEX "agent_actions_approved_idx" ON "agent_actions" USING btree ("updated_at") WHERE "agent_actions"."status" = 'approved';--> statement-breakpoint
CREATE INDEX "agent_actions_held_idx" ON "agent_actions" USING btree ("hold_expires_at") WHERE "agent_actions"."status" = 'held';--> statement-breakpoint
ALTER TABLE "agent_actions" ADD CONSTRAINT "agent_actions_status_enum" CHECK ("agent_actions"."status" IN ('requested','held','approved','rejected','expired','signed','submitted','confirmed','failed','reverted'));--> statement-breakpoint
-- The node is not frozen until an operator freezes it.
INSERT INTO "node_policy" ("id", "frozen") VALUES (1, false);--> statement-breakpoint
-- What the policies' windows count from the actions signed before this migration: each UTC day's
-- transfers of each agent, and the units of its x402 authorizations (their payees are not kept
-- apart before: a per-payee daily budget starts counting at the migration).
UPDATE "transfer_daily_spend" AS d SET "transfers" = s."transfers"
FROM (
	SELECT "agent_id", ("signed_at" AT TIME ZONE 'UTC')::date AS "day", count(*) AS "transfers"
	FROM "agent_actions" WHERE "kind" = 'transfer' AND "signed_at" IS NOT NULL GROUP BY 1, 2
) AS s
WHERE d."agent_id" = s."agent_id" AND d."day" = s."day";--> statement-breakpoint
UPDATE "x402_daily_authorizations" AS d SET "units" = s."units"
FROM (
	SELECT "agent_id", ("signed_at" AT TIME ZONE 'UTC')::date AS "day", coalesce(sum("amount_units"), 0) AS "units"
	FROM "agent_actions" WHERE "kind" = 'x402' AND "signed_at" IS NOT NULL GROUP BY 1, 2
) AS s
WHERE d."agent_id" = s."agent_id" AND d."day" = s."day";
