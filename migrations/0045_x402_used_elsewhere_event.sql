-- `x402.settlement.used_elsewhere` (docs/events.md#the-event-log): a settlement that moved nothing
-- (failed, reverted) whose authorization, the chain says, another relayer's transaction used, so
-- the payee was paid by that transaction. Learnt after the settlement ended (0043), by whoever asks
-- the chain, so the `.failed` or `.reverted` event went out with it null: this one tells a
-- subscriber when the node first records it true. Once per settlement: the update that records it
-- touches only a row that does not say true yet (used-elsewhere.ts recordAuthorizationUse), so of
-- two origins recording it at once the second, waiting on the row's lock, updates nothing, and
-- this writes only for a row that went to true. The rest is 0020's: one insert and one
-- notification per statement.
CREATE OR REPLACE FUNCTION "events_x402_settlements_updated"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
BEGIN
  WITH written AS (
    INSERT INTO events (agent_id, type, data)
    SELECT (SELECT i.agent_id FROM agent_identities i WHERE i.assigned_wallet = n.pay_to),
      -- A row whose status changes in the same statement gets its status event, whose data says it.
      CASE WHEN n.status IS DISTINCT FROM o.status OR o.tx_id IS NULL
        THEN 'x402.settlement.' || n.status
        ELSE 'x402.settlement.used_elsewhere' END,
      -- One lookup by key per settlement, as for the actions (0016).
      x402_settlement_view(n::x402_settlements,
        (SELECT t FROM outgoing_transactions t WHERE t.tx_id = n.tx_id))
    FROM updated_settlements n
    JOIN previous_settlements o ON o.id = n.id
    WHERE n.tx_id IS NOT NULL
      AND (n.status IS DISTINCT FROM o.status OR o.tx_id IS NULL
        OR (n.authorization_used_elsewhere IS TRUE AND o.authorization_used_elsewhere IS DISTINCT FROM TRUE))
    RETURNING id)
  SELECT max(id) INTO last_id FROM written;
  IF last_id IS NOT NULL THEN
    PERFORM pg_notify('events', last_id::text);
  END IF;
  RETURN NULL;
END
$$;
