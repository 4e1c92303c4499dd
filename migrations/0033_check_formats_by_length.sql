ALTER TABLE "agent_identities" DROP CONSTRAINT "agent_identities_wallet_format";--> statement-breakpoint
ALTER TABLE "agent_identities" DROP CONSTRAINT "agent_identities_key_ref_format";--> statement-breakpoint
ALTER TABLE "agent_tokens" DROP CONSTRAINT "agent_tokens_token_id_format";--> statement-breakpoint
ALTER TABLE "key_pool" DROP CONSTRAINT "key_pool_key_ref_format";--> statement-breakpoint
ALTER TABLE "key_pool" DROP CONSTRAINT "key_pool_address_format";--> statement-breakpoint
ALTER TABLE "operator_passkeys" DROP CONSTRAINT "operator_passkeys_public_key_format";--> statement-breakpoint
ALTER TABLE "operator_sessions" DROP CONSTRAINT "operator_sessions_token_hash_format";--> statement-breakpoint
ALTER TABLE "outgoing_transactions" DROP CONSTRAINT "outgoing_transactions_sender_format";--> statement-breakpoint
ALTER TABLE "outgoing_transactions" DROP CONSTRAINT "outgoing_transactions_hash_format";--> statement-breakpoint
ALTER TABLE "sender_nonces" DROP CONSTRAINT "sender_nonces_address_format";--> statement-breakpoint
ALTER TABLE "x402_payment_ids" DROP CONSTRAINT "x402_payment_ids_payer_format";--> statement-breakpoint
ALTER TABLE "x402_payment_ids" DROP CONSTRAINT "x402_payment_ids_id_format";--> statement-breakpoint
ALTER TABLE "x402_payment_ids" DROP CONSTRAINT "x402_payment_ids_nonce_format";--> statement-breakpoint
ALTER TABLE "x402_settlements" DROP CONSTRAINT "x402_settlements_payer_format";--> statement-breakpoint
ALTER TABLE "x402_settlements" DROP CONSTRAINT "x402_settlements_nonce_format";--> statement-breakpoint
ALTER TABLE "agent_identities" ADD CONSTRAINT "agent_identities_wallet_format" CHECK (char_length("agent_identities"."assigned_wallet") = 42 and "agent_identities"."assigned_wallet" ~ '^0x[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "agent_identities" ADD CONSTRAINT "agent_identities_key_ref_format" CHECK (char_length("agent_identities"."agent_transfer_key_ref") = 64 and "agent_identities"."agent_transfer_key_ref" ~ '^[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "agent_tokens" ADD CONSTRAINT "agent_tokens_token_id_format" CHECK (char_length("agent_tokens"."token_id") = 32 and "agent_tokens"."token_id" ~ '^[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "key_pool" ADD CONSTRAINT "key_pool_key_ref_format" CHECK (char_length("key_pool"."key_ref") = 64 and "key_pool"."key_ref" ~ '^[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "key_pool" ADD CONSTRAINT "key_pool_address_format" CHECK (char_length("key_pool"."address") = 42 and "key_pool"."address" ~ '^0x[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "operator_passkeys" ADD CONSTRAINT "operator_passkeys_public_key_format" CHECK (char_length("operator_passkeys"."public_key") = 132 and "operator_passkeys"."public_key" ~ '^0x04[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "operator_sessions" ADD CONSTRAINT "operator_sessions_token_hash_format" CHECK (char_length("operator_sessions"."token_hash") = 64 and "operator_sessions"."token_hash" ~ '^[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "outgoing_transactions" ADD CONSTRAINT "outgoing_transactions_sender_format" CHECK (char_length("outgoing_transactions"."sender") = 42 and "outgoing_transactions"."sender" ~ '^0x[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "outgoing_transactions" ADD CONSTRAINT "outgoing_transactions_hash_format" CHECK (char_length("outgoing_transactions"."tx_hash") = 66 and "outgoing_transactions"."tx_hash" ~ '^0x[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "sender_nonces" ADD CONSTRAINT "sender_nonces_address_format" CHECK (char_length("sender_nonces"."address") = 42 and "sender_nonces"."address" ~ '^0x[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "x402_payment_ids" ADD CONSTRAINT "x402_payment_ids_payer_format" CHECK (char_length("x402_payment_ids"."payer") = 42 and "x402_payment_ids"."payer" ~ '^0x[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "x402_payment_ids" ADD CONSTRAINT "x402_payment_ids_id_format" CHECK (char_length("x402_payment_ids"."payment_id") between 16 and 128 and "x402_payment_ids"."payment_id" ~ '^[A-Za-z0-9_-]*$');--> statement-breakpoint
ALTER TABLE "x402_payment_ids" ADD CONSTRAINT "x402_payment_ids_nonce_format" CHECK (char_length("x402_payment_ids"."nonce") = 66 and "x402_payment_ids"."nonce" ~ '^0x[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD CONSTRAINT "x402_settlements_payer_format" CHECK (char_length("x402_settlements"."payer") = 42 and "x402_settlements"."payer" ~ '^0x[0-9a-f]*$');--> statement-breakpoint
ALTER TABLE "x402_settlements" ADD CONSTRAINT "x402_settlements_nonce_format" CHECK (char_length("x402_settlements"."nonce") = 66 and "x402_settlements"."nonce" ~ '^0x[0-9a-f]*$');