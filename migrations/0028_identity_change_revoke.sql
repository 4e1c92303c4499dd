-- An identity's revocation is recorded as its disables and enables are (origin/identity/identity-admin.ts):
-- each row of identity_changes names what the operator did. The rows before this were all disables
-- and enables, which their before and after flags tell apart.
ALTER TABLE "identity_changes" ADD COLUMN "change" text;--> statement-breakpoint
UPDATE "identity_changes" SET "change" = CASE WHEN "after_enabled" THEN 'enable' ELSE 'disable' END;--> statement-breakpoint
ALTER TABLE "identity_changes" ALTER COLUMN "change" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "identity_changes" ADD CONSTRAINT "identity_changes_change_matches" CHECK (("identity_changes"."change" = 'disable' AND "identity_changes"."before_enabled" AND NOT "identity_changes"."after_enabled")
        OR ("identity_changes"."change" = 'enable' AND NOT "identity_changes"."before_enabled" AND "identity_changes"."after_enabled")
        OR ("identity_changes"."change" = 'revoke' AND "identity_changes"."before_enabled" = "identity_changes"."after_enabled"));
