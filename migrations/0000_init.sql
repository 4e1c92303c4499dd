CREATE TABLE "agent_actions" (
	"action_id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"agent_id" uuid NOT NULL,
	"kind" text NOT NULL,
	"idempotency_key" text NOT NULL,
	"request_hash" text NOT NULL,
	"status" text DEFAULT 'requested' NOT NULL,
	"amount_units" numeric(78, 0),
	"to_address" text,
	"tx_hash" text,
	"signed_payload" jsonb,
	"error_code" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "agent_actions_idempotency_uq" UNIQUE("agent_id","kind","idempotency_key"),
	CONSTRAINT "agent_actions_kind_enum" CHECK ("agent_actions"."kind" IN ('faucet','transfer','x402')),
	CONSTRAINT "agent_actions_status_enum" CHECK ("agent_actions"."status" IN ('requested','signed','submitted','confirmed','failed','reverted')),
	CONSTRAINT "agent_actions_amount_nonnegative" CHECK ("agent_actions"."amount_units" IS NULL OR "agent_actions"."amount_units" >= 0)
);
--> statement-breakpoint
CREATE TABLE "funding_exceptions" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"wallet" text NOT NULL,
	"mode" text DEFAULT 'approved_non_zero' NOT NULL,
	"ceiling_units" numeric(78, 0) NOT NULL,
	"reason" text NOT NULL,
	"approved_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "funding_exceptions_mode_enum" CHECK ("funding_exceptions"."mode" IN ('approved_non_zero')),
	CONSTRAINT "funding_exceptions_ceiling_nonnegative" CHECK ("funding_exceptions"."ceiling_units" >= 0),
	CONSTRAINT "funding_exceptions_reason_nonempty" CHECK (length(trim("funding_exceptions"."reason")) > 0)
);
--> statement-breakpoint
CREATE TABLE "agent_identities" (
	"agent_id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"assigned_wallet" text NOT NULL,
	"agent_transfer_key_ref" text NOT NULL,
	"capabilities" text[] NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"revoked" boolean DEFAULT false NOT NULL,
	"origin" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_verified_at" timestamp with time zone,
	"disabled_reason" text,
	"disabled_at" timestamp with time zone,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "agent_identities_assigned_wallet_unique" UNIQUE("assigned_wallet"),
	CONSTRAINT "agent_identities_agent_transfer_key_ref_unique" UNIQUE("agent_transfer_key_ref"),
	CONSTRAINT "agent_identities_capabilities_enum" CHECK ("agent_identities"."capabilities" <@ ARRAY['read','faucet','transfer']::text[] AND cardinality("agent_identities"."capabilities") > 0),
	CONSTRAINT "agent_identities_origin_enum" CHECK ("agent_identities"."origin" IN ('operator','public')),
	CONSTRAINT "agent_identities_wallet_format" CHECK ("agent_identities"."assigned_wallet" ~ '^0x[0-9a-f]{40}$'),
	CONSTRAINT "agent_identities_key_ref_format" CHECK ("agent_identities"."agent_transfer_key_ref" ~ '^[0-9a-f]{64}$')
);
--> statement-breakpoint
CREATE TABLE "agent_tokens" (
	"token_id" text PRIMARY KEY NOT NULL,
	"agent_id" uuid NOT NULL,
	"secret_hash" "bytea" NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "agent_tokens_token_id_format" CHECK ("agent_tokens"."token_id" ~ '^[0-9a-f]{32}$'),
	CONSTRAINT "agent_tokens_secret_hash_length" CHECK (octet_length("agent_tokens"."secret_hash") = 32)
);
--> statement-breakpoint
CREATE TABLE "identity_findings" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"agent_id" uuid NOT NULL,
	"class" text NOT NULL,
	"code" text NOT NULL,
	"detail" text,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "identity_findings_class_enum" CHECK ("identity_findings"."class" IN ('destructive','retryable','terminal_config','terminal_wire','terminal_agent','terminal_malformed','terminal_unknown'))
);
--> statement-breakpoint
CREATE TABLE "key_batches" (
	"batch_id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"namespace" text DEFAULT 'agent-transfer' NOT NULL,
	"size" integer NOT NULL,
	"status" text DEFAULT 'requested' NOT NULL,
	"backup_path" text,
	"backup_sha256" text,
	"failure_reason" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"status_changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "key_batches_status_enum" CHECK ("key_batches"."status" IN ('requested','generated','backup_written','backup_verified','available','failed')),
	CONSTRAINT "key_batches_size_positive" CHECK ("key_batches"."size" > 0)
);
--> statement-breakpoint
CREATE TABLE "key_pool" (
	"key_ref" text PRIMARY KEY NOT NULL,
	"batch_id" uuid NOT NULL,
	"address" text NOT NULL,
	"public_key" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"assigned_agent_id" uuid,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"assigned_at" timestamp with time zone,
	CONSTRAINT "key_pool_address_unique" UNIQUE("address"),
	CONSTRAINT "key_pool_status_enum" CHECK ("key_pool"."status" IN ('pending','free','assigned','quarantined')),
	CONSTRAINT "key_pool_key_ref_format" CHECK ("key_pool"."key_ref" ~ '^[0-9a-f]{64}$'),
	CONSTRAINT "key_pool_address_format" CHECK ("key_pool"."address" ~ '^0x[0-9a-f]{40}$'),
	CONSTRAINT "key_pool_assignment" CHECK (("key_pool"."status" = 'assigned') = ("key_pool"."assigned_agent_id" IS NOT NULL))
);
--> statement-breakpoint
CREATE TABLE "restore_evidence" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"batch_id" uuid NOT NULL,
	"scratch_namespace" text NOT NULL,
	"key_count" integer NOT NULL,
	"public_keys_sha256" text NOT NULL,
	"restored_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "registration_admissions" (
	"day" date NOT NULL,
	"ip_group" text NOT NULL,
	"count" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "registration_admissions_day_ip_group_pk" PRIMARY KEY("day","ip_group")
);
--> statement-breakpoint
CREATE TABLE "registration_attempts" (
	"minute" timestamp with time zone NOT NULL,
	"ip_group" text NOT NULL,
	"count" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "registration_attempts_minute_ip_group_pk" PRIMARY KEY("minute","ip_group")
);
--> statement-breakpoint
CREATE TABLE "registration_issued" (
	"agent_id" uuid PRIMARY KEY NOT NULL,
	"ip_group" text NOT NULL,
	"issued_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "registration_policy" (
	"id" smallint PRIMARY KEY DEFAULT 1 NOT NULL,
	"paused" boolean DEFAULT true NOT NULL,
	"per_ip_daily" integer DEFAULT 3 NOT NULL,
	"network_daily" integer DEFAULT 100 NOT NULL,
	"total_ceiling" integer DEFAULT 1000 NOT NULL,
	"key_reserve" integer DEFAULT 10 NOT NULL,
	"attempts_per_ip_per_minute" integer DEFAULT 10 NOT NULL,
	"attempts_global_per_minute" integer DEFAULT 120 NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "registration_policy_singleton" CHECK ("registration_policy"."id" = 1),
	CONSTRAINT "registration_policy_nonnegative" CHECK ("registration_policy"."per_ip_daily" >= 0 AND "registration_policy"."network_daily" >= 0 AND "registration_policy"."total_ceiling" >= 0 AND "registration_policy"."key_reserve" >= 0 AND "registration_policy"."attempts_per_ip_per_minute" >= 0 AND "registration_policy"."attempts_global_per_minute" >= 0)
);
--> statement-breakpoint
CREATE TABLE "registration_policy_changes" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"setting" text NOT NULL,
	"before_value" text NOT NULL,
	"after_value" text NOT NULL,
	"reason" text NOT NULL,
	"changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "registration_policy_changes_reason_nonempty" CHECK (length(trim("registration_policy_changes"."reason")) > 0)
);
--> statement-breakpoint
CREATE TABLE "x402_settlements" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"payer" text NOT NULL,
	"nonce" text NOT NULL,
	"pay_to" text NOT NULL,
	"amount_units" numeric(78, 0) NOT NULL,
	"requirement_hash" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"tx_hash" text,
	"error_reason" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "x402_settlements_payer_nonce_uq" UNIQUE("payer","nonce"),
	CONSTRAINT "x402_settlements_status_enum" CHECK ("x402_settlements"."status" IN ('pending','submitted','settled','failed'))
);
--> statement-breakpoint
ALTER TABLE "agent_actions" ADD CONSTRAINT "agent_actions_agent_id_agent_identities_agent_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agent_identities"("agent_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "agent_tokens" ADD CONSTRAINT "agent_tokens_agent_id_agent_identities_agent_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agent_identities"("agent_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "identity_findings" ADD CONSTRAINT "identity_findings_agent_id_agent_identities_agent_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agent_identities"("agent_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "key_pool" ADD CONSTRAINT "key_pool_batch_id_key_batches_batch_id_fk" FOREIGN KEY ("batch_id") REFERENCES "public"."key_batches"("batch_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "key_pool" ADD CONSTRAINT "key_pool_assigned_agent_id_agent_identities_agent_id_fk" FOREIGN KEY ("assigned_agent_id") REFERENCES "public"."agent_identities"("agent_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "restore_evidence" ADD CONSTRAINT "restore_evidence_batch_id_key_batches_batch_id_fk" FOREIGN KEY ("batch_id") REFERENCES "public"."key_batches"("batch_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "registration_issued" ADD CONSTRAINT "registration_issued_agent_id_agent_identities_agent_id_fk" FOREIGN KEY ("agent_id") REFERENCES "public"."agent_identities"("agent_id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "agent_actions_agent_kind_idx" ON "agent_actions" USING btree ("agent_id","kind","created_at");--> statement-breakpoint
CREATE INDEX "agent_actions_in_flight_idx" ON "agent_actions" USING btree ("status") WHERE "agent_actions"."status" IN ('signed','submitted');--> statement-breakpoint
CREATE INDEX "funding_exceptions_wallet_idx" ON "funding_exceptions" USING btree ("wallet");--> statement-breakpoint
CREATE INDEX "agent_identities_sweep_idx" ON "agent_identities" USING btree ("last_verified_at") WHERE "agent_identities"."enabled";--> statement-breakpoint
CREATE INDEX "agent_tokens_agent_idx" ON "agent_tokens" USING btree ("agent_id");--> statement-breakpoint
CREATE INDEX "identity_findings_agent_idx" ON "identity_findings" USING btree ("agent_id","at");--> statement-breakpoint
CREATE INDEX "key_batches_status_idx" ON "key_batches" USING btree ("status","status_changed_at");--> statement-breakpoint
CREATE INDEX "key_pool_free_idx" ON "key_pool" USING btree ("created_at") WHERE "key_pool"."status" = 'free';--> statement-breakpoint
CREATE INDEX "key_pool_batch_idx" ON "key_pool" USING btree ("batch_id");