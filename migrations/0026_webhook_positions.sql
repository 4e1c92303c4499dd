-- Each webhook endpoint keeps its own place in the event log (origin/webhooks/fan-out.ts), so one
-- at its bound of pending deliveries waits there without holding the others back. A new endpoint
-- starts at the log's horizon when it is added (the column default); the existing ones start where
-- the one shared cursor was (the horizon now when the fan-out never ran), so none skips an event
-- or gets one twice, and the shared cursor goes.
ALTER TABLE "webhook_endpoints" ADD COLUMN "fan_out_xid" "xid8" DEFAULT pg_snapshot_xmin(pg_current_snapshot()) NOT NULL;--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ADD COLUMN "fan_out_event_id" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
UPDATE "webhook_endpoints" SET "fan_out_xid" = c."xid", "fan_out_event_id" = c."event_id" FROM "webhook_fan_out_cursor" c;--> statement-breakpoint
DROP TABLE "webhook_fan_out_cursor" CASCADE;--> statement-breakpoint
CREATE INDEX "webhook_deliveries_pending_endpoint_idx" ON "webhook_deliveries" USING btree ("endpoint_id","next_attempt_at") WHERE status = 'pending';
