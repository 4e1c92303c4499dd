import type { Context, Handler } from "hono";
import {
  DEFAULT_SECRET_OVERLAP_HOURS,
  type WebhookAddResponse,
  type WebhookRemoveResponse,
  type WebhookReplayResponse,
  type WebhookRotateSecretResponse,
  type WebhooksOverview,
  webhookAddRequestSchema,
  webhookRemoveRequestSchema,
  webhookReplayRequestSchema,
  webhookRotateSecretRequestSchema,
} from "../../shared/console-schemas.ts";
import { isUuid } from "../../shared/uuid.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import { parseJsonBody } from "../http/json-body.ts";
import type { Infrastructure } from "../infrastructure.ts";
import type { ReplayScope, WebhookEndpoint } from "../webhooks/endpoints.ts";
import { parseEventTypes, WEBHOOK_EVENT_TYPES } from "../webhooks/event-types.ts";
import {
  addWebhookEndpoint,
  removeWebhookEndpoint,
  replayWebhookEndpoint,
  rotateWebhookEndpointSecret,
} from "../webhooks/manage.ts";
import { readEndpointsWithDeliveries } from "../webhooks/recent-deliveries.ts";

/** Deliveries shown per endpoint, newest first. */
const RECENT_DELIVERIES = 20;

/**
 * The console's webhooks (docs/operations.md#webhooks): the endpoints and their latest
 * deliveries; add, remove, replay and rotate-secret through the same code as `npm run webhooks`
 * (webhooks/manage.ts), each recorded in the audit with its reason and the channel `console`.
 */
export function webhooksConsoleHandlers(deps: Infrastructure): {
  list: Handler<AppEnv>;
  add: Handler<AppEnv>;
  remove: Handler<AppEnv>;
  replay: Handler<AppEnv>;
  rotateSecret: Handler<AppEnv>;
} {
  const db = deps.database.db;
  return {
    async list(c) {
      const endpoints = await readEndpointsWithDeliveries(db, {
        perEndpoint: RECENT_DELIVERIES,
        maxPending: deps.config.webhooks.maxPending,
      });
      const body: WebhooksOverview = {
        event_types: [...WEBHOOK_EVENT_TYPES],
        max_pending: deps.config.webhooks.maxPending,
        endpoints: endpoints.map((endpoint) => ({
          ...wireEndpoint(endpoint),
          pending: endpoint.pending,
          at_bound: endpoint.atBound,
          deliveries: endpoint.deliveries.map((each) => ({
            webhook_id: each.webhookId,
            event_id: each.eventId,
            event_type: each.eventType,
            status: each.status,
            attempts: each.attempts,
            last_http_status: each.lastHttpStatus,
            last_error: each.lastError,
            next_attempt_at: each.nextAttemptAt,
            delivered_at: each.deliveredAt,
            created_at: each.createdAt,
          })),
        })),
      };
      return c.json(body);
    },

    async add(c) {
      const body = await parseJsonBody(c, webhookAddRequestSchema);
      const types = parseEventTypes(body.events.join(","));
      if (!types.ok) {
        throw new AppError(
          "validation_failed",
          `unknown event type ${types.unknown.join(", ")}: events takes ${WEBHOOK_EVENT_TYPES.join(",")}`,
          { fields: { events: types.unknown.join(",") } },
        );
      }
      const added = await addWebhookEndpoint(db, {
        url: body.url,
        events: types.types,
        allowPrivate: deps.config.webhooks.allowPrivate,
        change: { reason: body.reason, source: "console", operator: c.get("operator") },
      });
      if (!added.ok) {
        throw new AppError(
          "validation_failed",
          added.error.code === "private_address"
            ? `url: ${added.error.message}, and this node does not allow private addresses (AGENT_WEBHOOKS_ALLOW_PRIVATE)`
            : `url: ${added.error.message}`,
          { fields: { url: added.error.code } },
        );
      }
      c.set("logFields", { outcome: "webhook_added" });
      const response: WebhookAddResponse = { ...wireEndpoint(added.value), secret: added.value.secret };
      return c.json(response, 201);
    },

    async remove(c) {
      const id = endpointId(c);
      const body = await parseJsonBody(c, webhookRemoveRequestSchema);
      if (
        !(await removeWebhookEndpoint(db, {
          id,
          change: { reason: body.reason, source: "console", operator: c.get("operator") },
        }))
      ) {
        throw new AppError("not_found", "no such webhook endpoint");
      }
      c.set("logFields", { outcome: "webhook_removed" });
      const response: WebhookRemoveResponse = { id, removed: true };
      return c.json(response);
    },

    async replay(c) {
      const id = endpointId(c);
      const body = await parseJsonBody(c, webhookReplayRequestSchema);
      const scope: ReplayScope =
        body.event_id !== undefined
          ? { kind: "event", eventId: BigInt(body.event_id) }
          : body.from_event_id !== undefined
            ? { kind: "from", eventId: BigInt(body.from_event_id) }
            : { kind: "all" };
      const queued = await replayWebhookEndpoint(db, {
        id,
        scope,
        change: { reason: body.reason, source: "console", operator: c.get("operator") },
        firstAttemptSeconds: deps.config.webhooks.retrySeconds[0] ?? 0,
      });
      if (queued === undefined) throw new AppError("not_found", "no such webhook endpoint");
      c.set("logFields", { outcome: "webhook_replayed" });
      const response: WebhookReplayResponse = { id, queued };
      return c.json(response);
    },

    async rotateSecret(c) {
      const id = endpointId(c);
      const body = await parseJsonBody(c, webhookRotateSecretRequestSchema);
      const rotated = await rotateWebhookEndpointSecret(db, {
        id,
        overlapSeconds: (body.overlap_hours ?? DEFAULT_SECRET_OVERLAP_HOURS) * 3600,
        change: { reason: body.reason, source: "console", operator: c.get("operator") },
      });
      if (!rotated) throw new AppError("not_found", "no such webhook endpoint");
      c.set("logFields", { outcome: "webhook_secret_rotated" });
      const response: WebhookRotateSecretResponse = {
        id,
        secret: rotated.secret,
        previous_secret_until: rotated.previousUntil,
      };
      return c.json(response);
    },
  };
}

function endpointId(c: Context<AppEnv>): string {
  const id = c.req.param("endpoint_id")?.toLowerCase() ?? "";
  if (!isUuid(id)) throw new AppError("not_found", "no such webhook endpoint");
  return id;
}

function wireEndpoint(endpoint: WebhookEndpoint): Omit<WebhookAddResponse, "secret"> {
  return {
    id: endpoint.id,
    url: endpoint.url,
    events: endpoint.events,
    enabled: endpoint.enabled,
    disabled_reason: endpoint.disabledReason,
    created_at: endpoint.createdAt,
  };
}
