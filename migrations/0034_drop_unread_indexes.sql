-- Two indexes that no statement needs, each written on every row it covers:
-- key_pool_free_idx holds the free keys by created_at, which key_pool_free_order_idx holds too, by
-- (created_at, key_ref) under the same condition, and serves the claim and the stock's count alike;
-- x402_settlements_payer_valid_before_idx served the settle batch's reservations read, which has
-- read x402_reservations since migration 0031 (every other read of a payer's settlements names its
-- nonce too, and takes the (payer, nonce) unique index). The second cost each settlement two index
-- entries: one at its claim, one when its transaction is stored (an update of tx_id, itself indexed).
DROP INDEX "key_pool_free_idx";--> statement-breakpoint
DROP INDEX "x402_settlements_payer_valid_before_idx";
