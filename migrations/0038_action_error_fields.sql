-- The extra fields a final refusal was answered with (limit_exceeded's figures, insufficient_funds'
-- figures, funding_gate_closed's reason, a faucet refusal's retry instant), so a repeat of the key
-- answers them again (origin/agent-actions/refusal-fields.ts). Nullable without a default: no
-- rewrite, and the rows ended before it answer as they did.
ALTER TABLE "agent_actions" ADD COLUMN "error_fields" jsonb;
