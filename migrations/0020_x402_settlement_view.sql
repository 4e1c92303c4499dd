-- An x402 settlement as GET {base}/x402/facilitator/settlements/… answers it
-- (origin/x402/payee/settlement-view.ts; docs/x402.md#settlement-status): the status words of the
-- settlement's own states, the amount in 6-decimal units as text, the network in CAIP-2 form (the
-- one chain this service settles on), the block the transaction was mined in, and for a settlement
-- that did not move money, why. One function, so whatever else renders a settlement (an event of
-- its state change) renders it the same way.
CREATE FUNCTION "x402_settlement_view"(x "x402_settlements", t "outgoing_transactions") RETURNS jsonb
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
      coalesce(x.error_reason, 'broadcast_refused') || coalesce(': ' || t.error, ''))
    -- Mined with status 0: the reason a settle of it answers.
    WHEN 'reverted' THEN jsonb_build_object('reason', 'invalid_exact_evm_transaction_failed')
    ELSE '{}'::jsonb END
$$;
