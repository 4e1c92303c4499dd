-- The two other ways an agent's token stops authenticating, besides a disable (0019), as the
-- agent's own events (docs/events.md#the-event-log): an open event stream ends at the event, as it
-- ends at `identity.disabled`, so no event committed after the change reaches a token that no
-- longer works (origin/events/stream.ts). Written in the change's transaction, so a change that
-- rolls back writes nothing; neither carries a token, its id or its hash, nor the operator's reason.
--
-- A revocation (false to true; it is final, so there is no way back to write): `identity.revoked`.
-- Row-level with a column list and a WHEN, as the enabled trigger: only an update that sets
-- `revoked` and changes it runs the function.
CREATE FUNCTION "events_identity_revoked"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  written_id bigint;
BEGIN
  INSERT INTO events (agent_id, type, data)
  VALUES (NEW.agent_id, 'identity.revoked', jsonb_build_object(
    'agent_id', NEW.agent_id,
    'assigned_wallet', NEW.assigned_wallet,
    'revoked', true,
    'at', js_iso_timestamp(coalesce(NEW.revoked_at, now()))))
  RETURNING id INTO written_id;
  PERFORM pg_notify('events', written_id::text);
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "agent_identities_events_revoked" AFTER UPDATE OF revoked ON "agent_identities"
FOR EACH ROW WHEN (NOT OLD.revoked AND NEW.revoked)
EXECUTE FUNCTION events_identity_revoked();--> statement-breakpoint
-- A token deleted: `token.rotated`, one per agent whose tokens the statement deleted. Rotation
-- (origin/auth/rotate-token.ts, the agent's own or the operator's) is the only statement that
-- deletes tokens, and it stores the new one in the same transaction. The event names no token: a
-- stream learns whether it was its own by reading whether its token is still there, so the stream
-- of the new token goes on.
CREATE FUNCTION "events_agent_tokens_deleted"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
BEGIN
  WITH written AS (
    INSERT INTO events (agent_id, type, data)
    SELECT i.agent_id, 'token.rotated', jsonb_build_object(
      'agent_id', i.agent_id, 'assigned_wallet', i.assigned_wallet, 'at', js_iso_timestamp(now()))
    FROM (SELECT DISTINCT agent_id FROM deleted_tokens) d
    JOIN agent_identities i ON i.agent_id = d.agent_id
    RETURNING id)
  SELECT max(id) INTO last_id FROM written;
  IF last_id IS NOT NULL THEN
    PERFORM pg_notify('events', last_id::text);
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "agent_tokens_events_delete" AFTER DELETE ON "agent_tokens"
REFERENCING OLD TABLE AS deleted_tokens
FOR EACH STATEMENT EXECUTE FUNCTION events_agent_tokens_deleted();
