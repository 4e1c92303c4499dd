DROP INDEX "agent_actions_requested_idx";--> statement-breakpoint
DROP INDEX "agent_actions_approved_idx";--> statement-breakpoint
CREATE INDEX "agent_actions_to_sign_idx" ON "agent_actions" USING btree ("updated_at") WHERE "agent_actions"."status" IN ('requested','approved');