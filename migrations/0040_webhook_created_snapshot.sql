-- An endpoint gets the events written after it was added (docs/operations.md#webhooks): those of
-- every transaction that had not committed when its row was written, including one that began
-- before and committed after (a money batch's transaction spans its signing). `created_at` could
-- not tell those from the ones that had committed: both began before it. The snapshot its insert
-- took can (origin/webhooks/endpoints.ts writtenSinceAdded). Added with no default first, so the
-- endpoints already there keep null and go by `created_at` as before; then new ones take it.
ALTER TABLE "webhook_endpoints" ADD COLUMN "created_snapshot" "pg_snapshot";--> statement-breakpoint
ALTER TABLE "webhook_endpoints" ALTER COLUMN "created_snapshot" SET DEFAULT pg_current_snapshot();
