-- Who wakes the event log's listeners (docs/events.md#how-events-are-written). A transaction that
-- notifies takes a lock of the whole cluster at its commit and keeps it through the commit's WAL
-- flush, so notifying commits go one at a time, each with its own flush. The origin's hot writers
-- (the money and x402 paths: an action requested, signed, broadcast, mined; a settlement given its
-- transaction) set `agent.events_wake` to 'after_commit' for their transaction and send one
-- coalesced notification after their commits (origin/events/wake.ts). Every other writer notifies
-- here, in its own transaction, as before.
CREATE FUNCTION "events_wake"(last_id bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF last_id IS NOT NULL AND current_setting('agent.events_wake', true) IS DISTINCT FROM 'after_commit' THEN
    PERFORM pg_notify('events', last_id::text);
  END IF;
END
$$;--> statement-breakpoint
-- 0016's function, waking through events_wake.
CREATE OR REPLACE FUNCTION "events_actions_inserted"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
BEGIN
  WITH written AS (
    INSERT INTO events (agent_id, type, data)
    SELECT n.agent_id, 'action.' || n.status, agent_action_view(n::agent_actions,
      (SELECT t.fee_wei FROM outgoing_transactions t WHERE t.tx_id = n.tx_id))
    FROM inserted_actions n
    RETURNING id)
  SELECT max(id) INTO last_id FROM written;
  PERFORM events_wake(last_id);
  RETURN NULL;
END
$$;--> statement-breakpoint
-- 0019's function, waking through events_wake.
CREATE OR REPLACE FUNCTION "events_actions_updated"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
BEGIN
  WITH written AS (
    INSERT INTO events (agent_id, type, data)
    SELECT n.agent_id, t.type, agent_action_view(n::agent_actions,
      (SELECT o.fee_wei FROM outgoing_transactions o WHERE o.tx_id = n.tx_id))
    FROM updated_actions n
    JOIN previous_actions p ON p.action_id = n.action_id
    CROSS JOIN LATERAL (VALUES
      (CASE WHEN n.status = 'failed' AND n.error_code = 'abandoned'
        THEN 'action.abandoned' ELSE 'action.' || n.status END),
      (CASE WHEN n.kind = 'x402' AND n.status = 'signed' THEN 'x402.authorization.signed' END)) t(type)
    WHERE n.status IS DISTINCT FROM p.status AND t.type IS NOT NULL
    RETURNING id)
  SELECT max(id) INTO last_id FROM written;
  PERFORM events_wake(last_id);
  RETURN NULL;
END
$$;--> statement-breakpoint
-- 0020's function, waking through events_wake.
CREATE OR REPLACE FUNCTION "events_x402_settlements_updated"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
BEGIN
  WITH written AS (
    INSERT INTO events (agent_id, type, data)
    SELECT (SELECT i.agent_id FROM agent_identities i WHERE i.assigned_wallet = n.pay_to),
      'x402.settlement.' || n.status,
      x402_settlement_view(n::x402_settlements,
        (SELECT t FROM outgoing_transactions t WHERE t.tx_id = n.tx_id))
    FROM updated_settlements n
    JOIN previous_settlements o ON o.id = n.id
    WHERE n.tx_id IS NOT NULL
      AND (n.status IS DISTINCT FROM o.status OR o.tx_id IS NULL)
    RETURNING id)
  SELECT max(id) INTO last_id FROM written;
  PERFORM events_wake(last_id);
  RETURN NULL;
END
$$;
