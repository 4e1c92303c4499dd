-- A replay queues a delivery again while an attempt of it may be in flight (docs/operations.md#webhooks):
-- the attempt records its outcome only under the count it was claimed with, so its answer cannot
-- end the replay. A constant default: no table rewrite.
ALTER TABLE "webhook_deliveries" ADD COLUMN "replays" integer DEFAULT 0 NOT NULL;