CREATE TABLE "registration_refusal_state" (
	"singleton" smallint PRIMARY KEY DEFAULT 1 NOT NULL,
	"refusing" text,
	"day" date,
	"since" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "registration_refusal_state_one_row" CHECK ("registration_refusal_state"."singleton" = 1),
	CONSTRAINT "registration_refusal_state_refusing_enum" CHECK ("registration_refusal_state"."refusing" IN ('key_reserve','total_ceiling','network_daily'))
);
--> statement-breakpoint
INSERT INTO "registration_refusal_state" ("singleton") VALUES (1) ON CONFLICT ("singleton") DO NOTHING;--> statement-breakpoint
-- As in 0016, and an x402 authorization that becomes signed also writes
-- `x402.authorization.signed`, with the same data, right after its `action.signed`
-- (docs/events.md#the-event-log). Same statement, same insert: the batched money path pays one CASE
-- per action, not another statement.
CREATE OR REPLACE FUNCTION "events_actions_updated"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
BEGIN
  WITH written AS (
    INSERT INTO events (agent_id, type, data)
    SELECT n.agent_id, t.type, agent_action_view(n::agent_actions,
      -- One lookup by key per action: a join planned on a transition table, which has no
      -- statistics, read all of outgoing_transactions on every statement.
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
  IF last_id IS NOT NULL THEN
    PERFORM pg_notify('events', last_id::text);
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
-- An identity's enabled flag changed: `identity.disabled` or `identity.enabled`, the agent's own
-- event. Row-level with a column list and a WHEN: only an update that sets `enabled` and changes
-- it runs the function (an operator's or the sweep's, one row each); the sweep's every other
-- update (last_verified_at) fires nothing, where a statement trigger would capture its rows.
-- The data uses the console's names for an identity; the disable reason stays with the operator
-- (console, audit): the agent's stream carries this event.
CREATE FUNCTION "events_identity_enabled_changed"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  written_id bigint;
BEGIN
  INSERT INTO events (agent_id, type, data)
  VALUES (NEW.agent_id, CASE WHEN NEW.enabled THEN 'identity.enabled' ELSE 'identity.disabled' END,
    jsonb_build_object(
      'agent_id', NEW.agent_id,
      'assigned_wallet', NEW.assigned_wallet,
      'enabled', NEW.enabled,
      'at', js_iso_timestamp(CASE WHEN NEW.enabled THEN now() ELSE coalesce(NEW.disabled_at, now()) END)))
  RETURNING id INTO written_id;
  PERFORM pg_notify('events', written_id::text);
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "agent_identities_events_enabled" AFTER UPDATE OF enabled ON "agent_identities"
FOR EACH ROW WHEN (OLD.enabled IS DISTINCT FROM NEW.enabled)
EXECUTE FUNCTION events_identity_enabled_changed();--> statement-breakpoint
-- A finding of the identity sweep: `finding.raised`, the agent's event, its data the finding as the
-- console lists it (GET {base}/admin/agents/operations: agent_id, class, code, at). The detail
-- stays with the operator: it can hold an internal error's words.
CREATE FUNCTION "events_findings_inserted"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
BEGIN
  WITH written AS (
    INSERT INTO events (agent_id, type, data)
    SELECT f.agent_id, 'finding.raised', jsonb_build_object(
      'agent_id', f.agent_id, 'class', f.class, 'code', f.code, 'at', js_iso_timestamp(f.at))
    FROM inserted_findings f
    RETURNING id)
  SELECT max(id) INTO last_id FROM written;
  IF last_id IS NOT NULL THEN
    PERFORM pg_notify('events', last_id::text);
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "identity_findings_events_insert" AFTER INSERT ON "identity_findings"
REFERENCING NEW TABLE AS inserted_findings
FOR EACH STATEMENT EXECUTE FUNCTION events_findings_inserted();--> statement-breakpoint
-- The registration settings of the policy row, as the console names them (registration/settings.ts).
CREATE FUNCTION "registration_settings_view"(p "registration_policy") RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT jsonb_build_object(
    'paused', p.paused,
    'per_ip_daily', p.per_ip_daily,
    'network_daily', p.network_daily,
    'total_ceiling', p.total_ceiling,
    'key_reserve', p.key_reserve,
    'attempts_per_ip_per_minute', p.attempts_per_ip_per_minute,
    'attempts_global_per_minute', p.attempts_global_per_minute)
$$;--> statement-breakpoint
-- Public registration paused (false to true): `registration.paused`, a node event (no agent).
CREATE FUNCTION "events_registration_paused"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  written_id bigint;
BEGIN
  INSERT INTO events (agent_id, type, data)
  VALUES (NULL, 'registration.paused',
    jsonb_build_object('settings', registration_settings_view(NEW), 'at', js_iso_timestamp(now())))
  RETURNING id INTO written_id;
  PERFORM pg_notify('events', written_id::text);
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "registration_policy_events_paused" AFTER UPDATE OF paused ON "registration_policy"
FOR EACH ROW WHEN (NOT OLD.paused AND NEW.paused)
EXECUTE FUNCTION events_registration_paused();--> statement-breakpoint
-- Public registration began refusing for a node-wide reason (registration_refusal_state moved to
-- another one): `registration.at_reserve` or `registration.at_quota`, a node event, with the
-- figures of the console's registration overview that tell why. Counted in full here: this runs
-- once per change of the state, never per refused request.
CREATE FUNCTION "events_registration_refusing"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  written_id bigint;
  p registration_policy;
  free_keys int;
BEGIN
  SELECT * INTO p FROM registration_policy WHERE id = 1;
  IF NEW.refusing = 'key_reserve' THEN
    SELECT count(*)::int INTO free_keys FROM key_pool WHERE status = 'free';
    INSERT INTO events (agent_id, type, data)
    VALUES (NULL, 'registration.at_reserve', jsonb_build_object(
      'key_stock', jsonb_build_object(
        'free', free_keys,
        'reserve', p.key_reserve,
        'issuable_before_reserve', greatest(0, free_keys - p.key_reserve)),
      'at', js_iso_timestamp(NEW.since)))
    RETURNING id INTO written_id;
  ELSE
    INSERT INTO events (agent_id, type, data)
    VALUES (NULL, 'registration.at_quota', jsonb_build_object(
      'quota', NEW.refusing,
      'limit', CASE WHEN NEW.refusing = 'total_ceiling' THEN p.total_ceiling ELSE p.network_daily END,
      'counters', jsonb_build_object(
        'issued_total', (SELECT count(*)::int FROM registration_issued),
        'issued_today', coalesce((SELECT a.count FROM registration_admissions a
                                  WHERE a.day = NEW.day AND a.ip_group = '*'), 0),
        'utc_day', to_char(NEW.day, 'YYYY-MM-DD')),
      'at', js_iso_timestamp(NEW.since)))
    RETURNING id INTO written_id;
  END IF;
  PERFORM pg_notify('events', written_id::text);
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "registration_refusal_state_events" AFTER UPDATE OF refusing ON "registration_refusal_state"
FOR EACH ROW WHEN (NEW.refusing IS NOT NULL AND NEW.refusing IS DISTINCT FROM OLD.refusing)
EXECUTE FUNCTION events_registration_refusing();
