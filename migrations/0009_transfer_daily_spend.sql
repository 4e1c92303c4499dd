CREATE TABLE "transfer_daily_spend" (
	"agent_id" uuid NOT NULL,
	"day" date NOT NULL,
	"spent_units" numeric(78, 0) NOT NULL,
	CONSTRAINT "transfer_daily_spend_pk" PRIMARY KEY("agent_id","day"),
	CONSTRAINT "transfer_daily_spend_nonnegative" CHECK ("transfer_daily_spend"."spent_units" >= 0)
);
--> statement-breakpoint
DROP INDEX "agent_actions_signed_idx";--> statement-breakpoint
DROP INDEX "agent_actions_in_flight_idx";--> statement-breakpoint
CREATE INDEX "agent_actions_faucet_signed_idx" ON "agent_actions" USING btree ("agent_id","signed_at") WHERE "agent_actions"."kind" = 'faucet' AND "agent_actions"."signed_at" IS NOT NULL;--> statement-breakpoint
-- What transfers signed before this migration count: every UTC day of every agent, from the actions.
INSERT INTO "transfer_daily_spend" ("agent_id", "day", "spent_units")
SELECT "agent_id", ("signed_at" AT TIME ZONE 'UTC')::date, sum("cost_units")
FROM "agent_actions"
WHERE "kind" = 'transfer' AND "signed_at" IS NOT NULL AND "cost_units" IS NOT NULL
GROUP BY 1, 2;
