-- Whether the authorization of a settlement that moved nothing (failed, reverted) was used by
-- another relayer's transaction, which then paid the payee (docs/x402.md#settlement-status):
-- learnt from the chain after the settlement ended, never for one that settled. Nullable, no
-- default: no rewrite; null is "not asked yet".
ALTER TABLE "x402_settlements" ADD COLUMN "authorization_used_elsewhere" boolean;
--> statement-breakpoint
-- The status routes and the events render it beside `reason`. Marking it later changes no status,
-- so the update trigger (0020) writes no second event for it: an event carries what was known when
-- the settlement ended.
CREATE OR REPLACE FUNCTION "x402_settlement_view"(x "x402_settlements", t "outgoing_transactions") RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT jsonb_build_object(
    'status', x.status,
    'payer', x.payer,
    'payee', x.pay_to,
    'amount', x.amount_units::text,
    'network', 'eip155:77',
    'transaction', x.tx_hash,
    'block_number', CASE WHEN x.status IN ('settled', 'reverted') THEN t.block_number::text END,
    'updated_at', js_iso_timestamp(x.updated_at))
  || CASE x.status
    -- Never mined: the reason the settlement ended, then the chain's own words when it gave any.
    WHEN 'failed' THEN jsonb_build_object('reason',
      coalesce(x.error_reason, 'broadcast_refused') || coalesce(': ' || t.error, ''),
      'authorization_used_elsewhere', x.authorization_used_elsewhere)
    -- Mined with status 0: the reason a settle of it answers.
    WHEN 'reverted' THEN jsonb_build_object('reason', 'invalid_exact_evm_transaction_failed',
      'authorization_used_elsewhere', x.authorization_used_elsewhere)
    ELSE '{}'::jsonb END
$$;
