-- The console's charts of the last hour and day (origin/console/charts-queries.ts) and its latest
-- actions and findings read a time range of these indexes instead of scanning the tables.
CREATE INDEX "agent_actions_updated_idx" ON "agent_actions" USING btree ("updated_at");--> statement-breakpoint
CREATE INDEX "identity_findings_at_idx" ON "identity_findings" USING btree ("at");--> statement-breakpoint
CREATE INDEX "registration_issued_issued_idx" ON "registration_issued" USING btree ("issued_at");--> statement-breakpoint
CREATE INDEX "x402_settlements_created_idx" ON "x402_settlements" USING btree ("created_at");