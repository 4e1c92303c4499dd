ALTER TABLE "restore_evidence" ALTER COLUMN "scratch_namespace" DROP NOT NULL;--> statement-breakpoint
-- Hand-edited: rows drilled before issue 15 restored into a scratch namespace of the live enclave.
ALTER TABLE "restore_evidence" ADD COLUMN "method" text NOT NULL DEFAULT 'scratch_namespace';--> statement-breakpoint
ALTER TABLE "restore_evidence" ALTER COLUMN "method" DROP DEFAULT;--> statement-breakpoint
ALTER TABLE "restore_evidence" ADD COLUMN "recovery_key_sha256" text;--> statement-breakpoint
ALTER TABLE "restore_evidence" ADD COLUMN "proven_key_ref" text;--> statement-breakpoint
ALTER TABLE "restore_evidence" ADD CONSTRAINT "restore_evidence_method_enum" CHECK ("restore_evidence"."method" IN ('scratch_namespace','recovery_key_new_enclave'));