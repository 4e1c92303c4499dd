-- Revoking an operator's passkey (docs/operations.md#revoking-a-passkey): when, why, through what
-- and by whom. Set once the enclave revoked it (at once for a pending passkey, which the enclave does
-- not know), so a revoke that failed leaves nothing set and is run again. A revoked passkey signs no
-- one in, its sessions end, and it is never enrolled again.
ALTER TABLE "operator_passkeys" ADD COLUMN "revoked_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "operator_passkeys" ADD COLUMN "revoked_reason" text;--> statement-breakpoint
ALTER TABLE "operator_passkeys" ADD COLUMN "revoked_source" text;--> statement-breakpoint
ALTER TABLE "operator_passkeys" ADD COLUMN "revoked_by" text;--> statement-breakpoint
ALTER TABLE "operator_passkeys" ADD COLUMN "revoked_by_key_id" text;--> statement-breakpoint
ALTER TABLE "operator_passkeys" ADD CONSTRAINT "operator_passkeys_revoked_whole" CHECK (("operator_passkeys"."revoked_at" is null) = ("operator_passkeys"."revoked_reason" is null) and ("operator_passkeys"."revoked_at" is null) = ("operator_passkeys"."revoked_source" is null));--> statement-breakpoint
ALTER TABLE "operator_passkeys" ADD CONSTRAINT "operator_passkeys_revoked_source_enum" CHECK ("operator_passkeys"."revoked_source" IN ('console','cli'));