-- Payment identifiers (the x402 `payment-identifier` extension, docs/x402.md#payment-identifiers):
-- the id a payer gave one logical payment, bound to that payer and to the fingerprint of what it pays
-- for, naming the settlement (the payer's nonce) that answers for it. Kept as long as settlements.
CREATE TABLE "x402_payment_ids" (
	"payer" text NOT NULL,
	"payment_id" text NOT NULL,
	"fingerprint" text NOT NULL,
	"nonce" text NOT NULL,
	"held_until" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "x402_payment_ids_pk" PRIMARY KEY("payer","payment_id"),
	CONSTRAINT "x402_payment_ids_payer_format" CHECK ("x402_payment_ids"."payer" ~ '^0x[0-9a-f]{40}$'),
	CONSTRAINT "x402_payment_ids_id_format" CHECK ("x402_payment_ids"."payment_id" ~ '^[A-Za-z0-9_-]{16,128}$'),
	CONSTRAINT "x402_payment_ids_nonce_format" CHECK ("x402_payment_ids"."nonce" ~ '^0x[0-9a-f]{64}$')
);
