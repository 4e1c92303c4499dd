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

export async function listEndpoints(db: Db): Promise<WebhookEndpoint[]> {
  const rows = await queryRows<EndpointRow>(
    db,
    sql`select ${COLUMNS} from webhook_endpoints order by created_at, id`,
  );
  return rows.map(endpointOf);
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
  params: { id: string; scope: ReplayScope },
): Promise<number | undefined> {
  const [endpoint] = await queryRows<{ id: string }>(
    db,
    sql`select id from webhook_endpoints where id = ${params.id}::uuid`,
  );
  if (!endpoint) return undefined;
  // Replaying is the operator saying the receiver is back: an endpoint a 410 disabled is enabled.
  await db.execute(
    sql`update webhook_endpoints set enabled = true, disabled_reason = null where id = ${params.id}::uuid`,
  );
  const { scope } = params;
  const which =
    scope.kind === "all"
      ? sql`e.occurred_at >= w.created_at`
      : scope.kind === "from"
        ? sql`e.id >= ${scope.eventId.toString()}::bigint`
        : sql`e.id = ${scope.eventId.toString()}::bigint`;
  const rows = await queryRows<{ id: string }>(
    db,
    sql`insert into webhook_deliveries (endpoint_id, event_id)
        select w.id, e.id from webhook_endpoints w join events e on e.type = any(w.event_types)
        where w.id = ${params.id}::uuid
          and ${which}
        on conflict (endpoint_id, event_id) do update
          set status = 'pending', attempts = 0, next_attempt_at = now(), last_error = null,
              updated_at = now()
        returning id`,
  );
  return rows.length;
}
