-- Operators' passkeys (docs/operations.md#passkeys): registered in the console, pending until the
-- policy authority enrolls one in the enclave; and the audit of each change a passkey approved.
CREATE TABLE "operator_passkeys" (
	"credential_id" text PRIMARY KEY NOT NULL,
	"key_id" text NOT NULL,
	"operator" text NOT NULL,
	"public_key" text NOT NULL,
	"rp_id" text NOT NULL,
	"origin" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"enrolled_at" timestamp with time zone,
	CONSTRAINT "operator_passkeys_key_id_unique" UNIQUE("key_id"),
	CONSTRAINT "operator_passkeys_public_key_format" CHECK ("operator_passkeys"."public_key" ~ '^0x04[0-9a-f]{128}$'),
	CONSTRAINT "operator_passkeys_credential_id_format" CHECK ("operator_passkeys"."credential_id" ~ '^[A-Za-z0-9_-]+$' and char_length("operator_passkeys"."credential_id") between 16 and 1364)
);
--> statement-breakpoint
CREATE TABLE "passkey_approvals" (
	"approval_id" bigserial PRIMARY KEY NOT NULL,
	"key_id" text NOT NULL,
	"operator" text NOT NULL,
	"op" text NOT NULL,
	"subject" text NOT NULL,
	"shown" jsonb NOT NULL,
	"approved_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "passkey_approvals_op_enum" CHECK ("passkey_approvals"."op" IN ('approve_held','set_agent_policy','set_node_frozen'))
);
--> statement-breakpoint
CREATE INDEX "passkey_approvals_at_idx" ON "passkey_approvals" USING btree ("approved_at");
