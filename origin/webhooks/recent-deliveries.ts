/**
 * The endpoints with their latest deliveries, as the console shows them
 * (docs/operations.md#webhooks): what each delivery came to, and when it is tried next.
 */
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../db/client.ts";
import { webhookIdOf } from "./deliver.ts";
import { type ListedWebhookEndpoint, listEndpoints } from "./endpoints.ts";

export type DeliveryView = {
  webhookId: string;
  eventId: string;
  /** Null when the retention sweep deleted the event. */
  eventType: string | null;
  status: "pending" | "delivered" | "failed" | "disabled";
  attempts: number;
  lastHttpStatus: number | null;
  lastError: string | null;
  /** Pending only: when the next attempt is due. */
  nextAttemptAt: string | null;
  deliveredAt: string | null;
  createdAt: string;
};

export type EndpointWithDeliveries = ListedWebhookEndpoint & { deliveries: DeliveryView[] };

type DeliveryRow = {
  id: string;
  endpoint_id: string;
  event_id: string;
  type: string | null;
  status: DeliveryView["status"];
  attempts: number;
  last_http_status: number | null;
  last_error: string | null;
  next_attempt_at: string | null;
  delivered_at: string | null;
  created_at: string;
};

/** Every endpoint with its queue, each with its `perEndpoint` latest deliveries, newest first. */
export async function readEndpointsWithDeliveries(
  db: Db,
  params: { perEndpoint: number; maxPending: number },
): Promise<EndpointWithDeliveries[]> {
  const { perEndpoint } = params;
  const endpoints = await listEndpoints(db, { maxPending: params.maxPending });
  // A delivered row is not updated again, so its last update is when it was delivered.
  const rows = await queryRows<DeliveryRow>(
    db,
    sql`select d.id::text as id, d.endpoint_id, d.event_id::text as event_id, e.type, d.status, d.attempts,
               d.last_http_status, d.last_error,
               case when d.status = 'pending' then js_iso_timestamp(d.next_attempt_at) end as next_attempt_at,
               case when d.status = 'delivered' then js_iso_timestamp(d.updated_at) end as delivered_at,
               js_iso_timestamp(d.created_at) as created_at
        from webhook_endpoints w
        cross join lateral (
          select * from webhook_deliveries where endpoint_id = w.id order by id desc limit ${perEndpoint}
        ) d
        left join events e on e.id = d.event_id
        order by d.id desc`,
  );
  const byEndpoint = new Map<string, DeliveryView[]>();
  for (const row of rows) {
    const list = byEndpoint.get(row.endpoint_id) ?? [];
    list.push({
      webhookId: webhookIdOf(BigInt(row.id)),
      eventId: row.event_id,
      eventType: row.type,
      status: row.status,
      attempts: row.attempts,
      lastHttpStatus: row.last_http_status,
      lastError: row.last_error,
      nextAttemptAt: row.next_attempt_at,
      deliveredAt: row.delivered_at,
      createdAt: row.created_at,
    });
    byEndpoint.set(row.endpoint_id, list);
  }
  return endpoints.map((endpoint) => ({ ...endpoint, deliveries: byEndpoint.get(endpoint.id) ?? [] }));
}
