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
--> statement-breakpoint
-- One event per settlement whose state a statement changed, `x402.settlement.<status>` with the
-- settlement as its status routes answer it (docs/events.md#the-event-log): in the transaction of
-- the change, one insert and one notification per statement, as migration 0016 writes the actions'.
-- A settlement is announced once it has a transaction (the settle batch's store statement gives a
-- claim its transaction while it is still `claimed`): a claim the batch refused is deleted in the
-- same transaction and never existed for anyone outside it. Its agent is the payee's, when the
-- payee is an agent's wallet; otherwise the event is the node's own (agent_id null).
CREATE FUNCTION "events_x402_settlements_updated"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
BEGIN
  WITH written AS (
    INSERT INTO events (agent_id, type, data)
    SELECT (SELECT i.agent_id FROM agent_identities i WHERE i.assigned_wallet = n.pay_to),
      'x402.settlement.' || n.status,
      -- One lookup by key per settlement, as for the actions (0016).
      x402_settlement_view(n::x402_settlements,
        (SELECT t FROM outgoing_transactions t WHERE t.tx_id = n.tx_id))
    FROM updated_settlements n
    JOIN previous_settlements o ON o.id = n.id
    WHERE n.tx_id IS NOT NULL
      AND (n.status IS DISTINCT FROM o.status OR o.tx_id IS NULL)
    RETURNING id)
  SELECT max(id) INTO last_id FROM written;
  IF last_id IS NOT NULL THEN
    PERFORM pg_notify('events', last_id::text);
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "x402_settlements_events_update" AFTER UPDATE ON "x402_settlements"
REFERENCING OLD TABLE AS previous_settlements NEW TABLE AS updated_settlements
FOR EACH STATEMENT EXECUTE FUNCTION events_x402_settlements_updated();
