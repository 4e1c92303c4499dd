-- Which purchase of one quote an x402 authorization asked for without a key or nonce is (the
-- agent, the resource URL, the quote's terms), so that a retry finds the latest one by the quote
-- alone, whatever second or origin it is read on (origin/x402/payer/authorize-derived-key.ts).
ALTER TABLE "agent_actions" ADD COLUMN "x402_purchase" text;--> statement-breakpoint
CREATE INDEX "agent_actions_x402_purchase_idx" ON "agent_actions" USING btree ("agent_id","x402_purchase","created_at") WHERE "agent_actions"."x402_purchase" IS NOT NULL;