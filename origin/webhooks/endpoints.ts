/**
 * The operator's webhook endpoints (docs/operations.md#webhooks): added with a fresh secret shown
 * once, listed without it, removed with their deliveries.
 */
import { sql } from "drizzle-orm";
import { type Db, pgArrayLiteral, queryRows } from "../db/client.ts";
import { newEndpointSecret } from "./signing.ts";

/** An endpoint as `list` shows it: never the secret. */
export type WebhookEndpoint = {
  id: string;
  url: string;
  events: string[];
  enabled: boolean;
  disabledReason: string | null;
  createdAt: string;
};

type EndpointRow = {
  id: string;
  url: string;
  event_types: string[];
  enabled: boolean;
  disabled_reason: string | null;
  created_at: string;
};

const endpointOf = (row: EndpointRow): WebhookEndpoint => ({
  id: row.id,
  url: row.url,
  events: row.event_types,
  enabled: row.enabled,
  disabledReason: row.disabled_reason,
  createdAt: row.created_at,
});

const COLUMNS = sql`id, url, event_types, enabled, disabled_reason, js_iso_timestamp(created_at) as created_at`;

/**
 * Whether the event `e` was written after the endpoint `w` was added, the endpoint's events: its
 * transaction had not committed when the endpoint's row was written. One that began before and
 * committed after is the endpoint's (its `occurred_at`, the transaction's start, is older than the
 * endpoint); one that committed before is not, though its transaction may be above the endpoint's
 * first place (it ended while an older one still ran). An endpoint added before migration 0040 has
 * no snapshot and goes by the times.
 */
export const writtenSinceAdded = sql`case when w.created_snapshot is null then e.occurred_at >= w.created_at
  else not pg_visible_in_snapshot(e.xid, w.created_snapshot) end`;

/** Adds an endpoint with a new secret; the secret is returned here and never again. */
export async function addEndpoint(
  db: Db,
  params: { url: string; events: readonly string[] },
): Promise<WebhookEndpoint & { secret: string }> {
  const secret = newEndpointSecret();
  const [row] = await queryRows<EndpointRow>(
    db,
    sql`insert into webhook_endpoints (url, event_types, secret)
        values (${params.url}, ${pgArrayLiteral(params.events)}::text[], ${secret})
        returning ${COLUMNS}`,
  );
  return { ...endpointOf(row!), secret };
}

/** A new secret of an endpoint, and until when the one it replaced still signs. */
export type RotatedSecret = { secret: string; previousUntil: string };

/**
 * Gives the endpoint a new secret, shown here and never again. The one it replaces signs beside it
 * for `overlapSeconds` more (none: it stops at once, for a secret that leaked), so a receiver that
 * still holds it verifies until it has the new one; a secret from an earlier rotation is dropped.
 * Undefined when there is no such endpoint.
 */
export async function rotateEndpointSecret(
  db: Db,
  params: { id: string; overlapSeconds: number },
): Promise<RotatedSecret | undefined> {
  const secret = newEndpointSecret();
  const [row] = await queryRows<{ previous_until: string }>(
    db,
    sql`update webhook_endpoints
        set previous_secret = secret, secret = ${secret},
            previous_secret_until = now() + make_interval(secs => ${params.overlapSeconds}::int)
        where id = ${params.id}::uuid
        returning js_iso_timestamp(previous_secret_until) as previous_until`,
  );
  return row ? { secret, previousUntil: row.previous_until } : undefined;
}

/** An endpoint as `list` and the console show it: with its queue against the bound. */
export type ListedWebhookEndpoint = WebhookEndpoint & {
  /** Its pending deliveries: queued, or waiting for a retry. */
  pending: number;
  /**
   * At AGENT_WEBHOOKS_MAX_PENDING or past it (a replay queues past it): the fan-out queues nothing
   * more for it until deliveries end, and it keeps its place in the log meanwhile.
   */
  atBound: boolean;
};

export async function listEndpoints(
  db: Db,
  params: { maxPending: number },
): Promise<ListedWebhookEndpoint[]> {
  const rows = await queryRows<EndpointRow & { pending: number }>(
    db,
    sql`select ${COLUMNS},
               (select count(*)::int from webhook_deliveries d
                where d.endpoint_id = w.id and d.status = 'pending') as pending
        from webhook_endpoints w order by created_at, id`,
  );
  return rows.map((row) => ({
    ...endpointOf(row),
    pending: row.pending,
    atBound: row.pending >= params.maxPending,
  }));
}

/** Removes the endpoint and its deliveries; false when there is none. */
export async function removeEndpoint(db: Db, id: string): Promise<boolean> {
  const rows = await queryRows<{ id: string }>(
    db,
    sql`delete from webhook_endpoints where id = ${id}::uuid returning id`,
  );
  return rows.length > 0;
}

/**
 * Which events a replay queues again: one event, those from an event id on, or all the endpoint
 * may still get (those since it was added).
 */
export type ReplayScope =
  | { kind: "event"; eventId: bigint }
  | { kind: "from"; eventId: bigint }
  | { kind: "all" };

/**
 * Queues the endpoint's subscribed events in `scope` again: new deliveries for events it never
 * had, and the ones it had reset to a first attempt now, under the same webhook-id; re-enables the
 * endpoint. Returns how many, or undefined when there is no such endpoint.
 */
export async function replayEndpoint(
  db: Db,
  params: {
    id: string;
    scope: ReplayScope;
    /** The schedule's first entry: seconds to the first attempt of each (fan-out.ts); 0 when not given. */
    firstAttemptSeconds?: number;
  },
): Promise<number | undefined> {
  const [endpoint] = await queryRows<{ id: string }>(
    db,
    sql`select id from webhook_endpoints where id = ${params.id}::uuid`,
  );
  if (!endpoint) return undefined;
  // Replaying is the operator saying the receiver is back: an endpoint a 410 disabled is enabled.
  // A disabled endpoint was queued nothing meanwhile and its place stayed where the 410 found it:
  // it goes on from the log's horizon, as a new one would, and the replay's scope is what it gets
  // of the events in between.
  await db.execute(
    sql`update webhook_endpoints set enabled = true, disabled_reason = null,
          fan_out_xid = case when enabled then fan_out_xid else pg_snapshot_xmin(pg_current_snapshot()) end,
          fan_out_event_id = case when enabled then fan_out_event_id else 0 end
        where id = ${params.id}::uuid`,
  );
  const { scope } = params;
  const which =
    scope.kind === "all"
      ? writtenSinceAdded
      : scope.kind === "from"
        ? sql`e.id >= ${scope.eventId.toString()}::bigint`
        : sql`e.id = ${scope.eventId.toString()}::bigint`;
  const first = sql`now() + make_interval(secs => ${params.firstAttemptSeconds ?? 0}::int)`;
  const rows = await queryRows<{ id: string }>(
    db,
    sql`insert into webhook_deliveries (endpoint_id, event_id, next_attempt_at)
        select w.id, e.id, ${first} from webhook_endpoints w join events e on e.type = any(w.event_types)
        where w.id = ${params.id}::uuid
          and ${which}
        on conflict (endpoint_id, event_id) do update
          set status = 'pending', attempts = 0, replays = webhook_deliveries.replays + 1,
              next_attempt_at = ${first}, last_error = null, updated_at = now()
        returning id`,
  );
  return rows.length;
}
