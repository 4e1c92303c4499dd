CREATE TABLE "x402_daily_authorizations" (
	"agent_id" uuid NOT NULL,
	"day" date NOT NULL,
	"authorizations" integer NOT NULL,
	CONSTRAINT "x402_daily_authorizations_pk" PRIMARY KEY("agent_id","day"),
	CONSTRAINT "x402_daily_authorizations_nonnegative" CHECK ("x402_daily_authorizations"."authorizations" >= 0)
);
--> statement-breakpoint
-- What x402 authorizations signed before this migration count: every UTC day of every agent, from the actions.
INSERT INTO "x402_daily_authorizations" ("agent_id", "day", "authorizations")
SELECT "agent_id", ("signed_at" AT TIME ZONE 'UTC')::date, count(*)
FROM "agent_actions"
WHERE "kind" = 'x402' AND "signed_at" IS NOT NULL
GROUP BY 1, 2;
