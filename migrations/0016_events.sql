CREATE TABLE "events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"agent_id" uuid,
	"type" text NOT NULL,
	"occurred_at" timestamp with time zone DEFAULT now() NOT NULL,
	"data" jsonb NOT NULL,
	"xid" "xid8" DEFAULT pg_current_xact_id() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "events_agent_order_idx" ON "events" USING btree ("agent_id","xid","id");--> statement-breakpoint
CREATE INDEX "events_occurred_brin" ON "events" USING brin ("occurred_at");--> statement-breakpoint
-- A timestamp as JavaScript's Date.prototype.toISOString prints the Date node-postgres makes of it:
-- UTC, milliseconds truncated from Postgres's microseconds (never rounded), and `Z`.
CREATE FUNCTION "js_iso_timestamp"(ts timestamptz) RETURNS text
LANGUAGE sql STABLE STRICT PARALLEL SAFE AS $$
  SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;--> statement-breakpoint
-- An agent action as GET {base}/agent/v1/actions/{id} answers it (origin/agent-actions/view.ts
-- actionView, the columns of repository.ts selectAction): the same fields, nulls and text forms.
-- origin/events/view-equality.int.test.ts compares the two renderings.
CREATE FUNCTION "agent_action_view"(a "agent_actions", fee_wei numeric) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT jsonb_build_object(
    'action_id', a.action_id,
    'kind', a.kind,
    'status', a.status,
    'tx_hash', a.tx_hash,
    'amount', a.amount_units::text,
    'to', a.to_address,
    'fee_wei', fee_wei::text,
    'error_code', CASE WHEN a.status IN ('failed', 'reverted')
      THEN coalesce(a.error_code, CASE WHEN a.status = 'reverted' THEN 'reverted' END) END,
    'last_broadcast_error', CASE WHEN a.status = 'submitted' THEN a.last_broadcast_error END,
    'replaced_by', a.replaced_by_action_id,
    'rule', a.hold_rule,
    'expires_at', CASE WHEN a.status = 'held' THEN js_iso_timestamp(a.hold_expires_at) END,
    'created_at', js_iso_timestamp(a.created_at),
    'updated_at', js_iso_timestamp(a.updated_at))
$$;--> statement-breakpoint
-- One event per action a statement inserts, one insert and one notification per statement
-- (docs/events.md#how-events-are-written): the batched money path pays one statement, not one per row.
CREATE FUNCTION "events_actions_inserted"() RETURNS trigger
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
  IF last_id IS NOT NULL THEN
    PERFORM pg_notify('events', last_id::text);
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
-- One event per action whose status a statement changed (transition tables cannot be combined
-- with UPDATE OF status, so the old and new rows are joined on the key). An action nobody signed
-- in time ends `failed` with error_code `abandoned` (actions/abandon.ts): its event is
-- `action.abandoned`, as the event types name it.
CREATE FUNCTION "events_actions_updated"() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  last_id bigint;
BEGIN
  WITH written AS (
    INSERT INTO events (agent_id, type, data)
    SELECT n.agent_id, CASE WHEN n.status = 'failed' AND n.error_code = 'abandoned'
      THEN 'action.abandoned' ELSE 'action.' || n.status END, agent_action_view(n::agent_actions,
      -- One lookup by key per action (here and above): a join planned on a transition table,
      -- which has no statistics, read all of outgoing_transactions on every statement.
      (SELECT t.fee_wei FROM outgoing_transactions t WHERE t.tx_id = n.tx_id))
    FROM updated_actions n
    JOIN previous_actions o ON o.action_id = n.action_id
    WHERE n.status IS DISTINCT FROM o.status
    RETURNING id)
  SELECT max(id) INTO last_id FROM written;
  IF last_id IS NOT NULL THEN
    PERFORM pg_notify('events', last_id::text);
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "agent_actions_events_insert" AFTER INSERT ON "agent_actions"
REFERENCING NEW TABLE AS inserted_actions
FOR EACH STATEMENT EXECUTE FUNCTION events_actions_inserted();--> statement-breakpoint
CREATE TRIGGER "agent_actions_events_update" AFTER UPDATE ON "agent_actions"
REFERENCING OLD TABLE AS previous_actions NEW TABLE AS updated_actions
FOR EACH STATEMENT EXECUTE FUNCTION events_actions_updated();
