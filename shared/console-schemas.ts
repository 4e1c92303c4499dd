/**
 * Wire schemas of the operator console API (docs/operations.md, "The operator console and metrics"), requests
 * and responses in one module: the routes validate requests with them, the tests check responses
 * against them, and the OpenAPI document is to be generated from them. Runtime-neutral.
 */
import * as z from "zod";
import { hasControlCharacter } from "./control-characters.ts";
import { MAX_EVENT_ID, MAX_WEBHOOK_URL_LENGTH, parseEventId } from "./event-types.ts";

const timestamp = z.string().describe("ISO 8601, UTC");
const count = z.number().int().nonnegative();

/** The registration settings and their ranges (origin/registration/settings.ts is the authority). */
export const settingsSchema = z.object({
  paused: z.boolean(),
  per_ip_daily: count,
  network_daily: count,
  total_ceiling: count,
  key_reserve: count,
  attempts_per_ip_per_minute: count,
  attempts_global_per_minute: count,
});

// ─── Requests ────────────────────────────────────────────────────────────────────────────────

/** A change's reason, as every console change takes one (the audit shows it). */
export const reasonSchema = z
  .string({ error: "reason must be a string" })
  .max(500, "reason must be at most 500 characters")
  .refine((value) => value.trim() !== "", "reason must not be empty")
  .refine((value) => !hasControlCharacter(value, "\t\n"), "reason must not hold control characters");

/**
 * POST {base}/admin/agents/registration/settings. `changes` maps setting names to values; the
 * names and ranges are checked by the settings service, every one before anything changes.
 */
export const settingsChangeRequestSchema = z.strictObject({
  changes: z.record(z.string(), z.union([z.boolean(), z.number()]), {
    error: "changes must map setting names to values",
  }),
  reason: reasonSchema,
});
export type SettingsChangeRequest = z.infer<typeof settingsChangeRequestSchema>;

/** POST {base}/admin/agents/registration/identity. */
export const identityChangeRequestSchema = z.strictObject({
  agent_id: z.uuid({ error: "agent_id must be an agent id (a UUID)" }),
  /** revoke is final: no action undoes it (docs/operations.md#the-operator-console-and-metrics). */
  action: z.enum(["disable", "enable", "revoke"], { error: "action must be disable, enable or revoke" }),
  reason: reasonSchema,
});
export type IdentityChangeRequest = z.infer<typeof identityChangeRequestSchema>;

/** POST {base}/admin/agents/webhooks: an endpoint, its event types (each a type of the log). */
export const webhookAddRequestSchema = z.strictObject({
  url: z
    .string({ error: "url must be a string" })
    .max(MAX_WEBHOOK_URL_LENGTH, `url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`),
  events: z
    .array(z.string(), { error: "events must be a list of event types" })
    .min(1, "events must name at least one event type")
    .max(50, "events must name at most 50 event types"),
  reason: reasonSchema,
});
export type WebhookAddRequest = z.infer<typeof webhookAddRequestSchema>;

/** POST {base}/admin/agents/webhooks/{endpoint_id}/remove. */
export const webhookRemoveRequestSchema = z.strictObject({ reason: reasonSchema });
export type WebhookRemoveRequest = z.infer<typeof webhookRemoveRequestSchema>;

const EVENT_ID_MESSAGE = `an event id is a whole number up to ${MAX_EVENT_ID}, as a string`;
const eventId = z
  .string()
  .regex(/^\d{1,19}$/, EVENT_ID_MESSAGE)
  .refine((text) => parseEventId(text) !== undefined, EVENT_ID_MESSAGE);

/**
 * POST {base}/admin/agents/webhooks/{endpoint_id}/replay: one event (`event_id`), the events
 * from one on (`from_event_id`), or, with neither, every event since the endpoint was added.
 */
export const webhookReplayRequestSchema = z
  .strictObject({ event_id: eventId.optional(), from_event_id: eventId.optional(), reason: reasonSchema })
  .refine((body) => body.event_id === undefined || body.from_event_id === undefined, {
    message: "event_id and from_event_id do not go together",
  });
export type WebhookReplayRequest = z.infer<typeof webhookReplayRequestSchema>;

/**
 * How long a rotated secret's predecessor still signs beside it (the console's and `npm run
 * webhooks -- rotate-secret`'s): a day unless named (Standard Webhooks' example: a day for
 * receivers to take the new one), at most a week, 0 for a secret that leaked.
 */
export const DEFAULT_SECRET_OVERLAP_HOURS = 24;
export const MAX_SECRET_OVERLAP_HOURS = 168;

/** POST {base}/admin/agents/webhooks/{endpoint_id}/rotate-secret. */
export const webhookRotateSecretRequestSchema = z.strictObject({
  overlap_hours: z
    .number({ error: `overlap_hours must be a whole number of hours from 0 to ${MAX_SECRET_OVERLAP_HOURS}` })
    .int(`overlap_hours must be a whole number of hours from 0 to ${MAX_SECRET_OVERLAP_HOURS}`)
    .min(0, `overlap_hours must be a whole number of hours from 0 to ${MAX_SECRET_OVERLAP_HOURS}`)
    .max(
      MAX_SECRET_OVERLAP_HOURS,
      `overlap_hours must be a whole number of hours from 0 to ${MAX_SECRET_OVERLAP_HOURS}`,
    )
    .optional()
    .describe(
      `how long the replaced secret still signs: ${DEFAULT_SECRET_OVERLAP_HOURS} when absent, 0 when it leaked`,
    ),
  reason: reasonSchema,
});
export type WebhookRotateSecretRequest = z.infer<typeof webhookRotateSecretRequestSchema>;

// ─── Responses ───────────────────────────────────────────────────────────────────────────────

export const settingsChangeResponseSchema = z.object({
  /** One entry per setting whose value changed; a setting set to its current value is no change. */
  changed: z.array(z.object({ setting: z.string(), before: z.string(), after: z.string() })),
  settings: settingsSchema,
});
export type SettingsChangeResponse = z.infer<typeof settingsChangeResponseSchema>;

export const identityChangeResponseSchema = z.object({
  agent_id: z.string(),
  changed: z.boolean(),
  before: z.object({ enabled: z.boolean() }),
  after: z.object({ enabled: z.boolean() }),
  /** A revoked identity stays refused whatever its enabled flag. */
  revoked: z.boolean(),
});
export type IdentityChangeResponse = z.infer<typeof identityChangeResponseSchema>;

export const LOCAL_BUCKET_TIERS = ["pre_auth_ip", "per_agent", "registration_early"] as const;

/** GET {base}/admin/agents/registration. */
export const registrationOverviewSchema = z.object({
  generated_at: timestamp,
  settings: settingsSchema,
  settings_updated_at: timestamp,
  /** The setting ranges the settings form offers. */
  setting_ranges: z.record(
    z.string(),
    z.object({ kind: z.enum(["boolean", "integer"]), max: count.optional() }),
  ),
  /** Persistent counters: admission attempts reach the database, refusals before it do not. */
  counters: z.object({
    issued_total: count,
    issued_today: count,
    attempts_this_minute: count,
    attempts_last_hour: count,
    utc_day: z.string(),
  }),
  key_stock: z.object({
    /** Verified, backed-up keys ready for provisioning. */
    free: count,
    /** Batches still on their way to `available`, and the keys they will add. */
    in_flight_batches: count,
    in_flight_keys: count,
    /** Keys public registration leaves for operator provisioning (a setting). */
    reserve: count,
    issuable_before_reserve: count,
  }),
  /** The last 50 public identities, newest first. */
  identities: z.array(
    z.object({
      agent_id: z.string(),
      assigned_wallet: z.string(),
      enabled: z.boolean(),
      revoked: z.boolean(),
      disabled_reason: z.string().nullable(),
      created_at: timestamp,
      ip_group: z.string().nullable(),
    }),
  ),
  /**
   * Hashed IP groups (HMAC under AGENT_REGISTRATION_IP_SECRET) active today or in the last hour,
   * or among the latest to register, with their persistent counts; at most 100, latest first.
   */
  ip_groups: z.array(
    z.object({
      ip_group: z.string(),
      issued_total: count,
      issued_today: count,
      attempts_this_minute: count,
      attempts_last_hour: count,
      last_issued_at: timestamp.nullable(),
    }),
  ),
  /** This node's in-memory limiter buckets: per node, reset on restart. */
  local_buckets: z.object({
    scope: z.literal("node"),
    reset_on_restart: z.literal(true),
    window_seconds: z.literal(60),
    node_started_at: timestamp,
    buckets: z.array(
      z.object({
        tier: z.enum(LOCAL_BUCKET_TIERS),
        /** An agent id, or a hashed IP group: the console shows no client address. */
        key: z.string(),
        count,
      }),
    ),
  }),
});
export type RegistrationOverview = z.infer<typeof registrationOverviewSchema>;

/** GET {base}/admin/agents/operations: read-only views beyond the spec. */
export const operationsOverviewSchema = z.object({
  generated_at: timestamp,
  identity_findings: z.object({
    by_class: z.array(z.object({ class: z.string(), count, last_at: timestamp.nullable() })),
    recent: z.array(z.object({ agent_id: z.string(), class: z.string(), code: z.string(), at: timestamp })),
  }),
  key_batches: z.object({
    by_state: z.array(z.object({ state: z.string(), count, keys: count })),
    /**
     * Backed-up batches by restore drill: `drilled` have restore evidence (their wallets may move
     * funds); `undrilled` lists, oldest first (at most 50), those the funding gate still holds,
     * for `npm run restore-drill -- --pending`.
     */
    drills: z.object({
      drilled: count,
      undrilled_count: count,
      undrilled: z.array(z.object({ batch_id: z.string(), keys: count, created_at: timestamp })),
    }),
  }),
  actions: z.object({
    by_state: z.array(z.object({ kind: z.string(), state: z.string(), count })),
    recent: z.array(
      z.object({
        action_id: z.string(),
        agent_id: z.string(),
        kind: z.string(),
        status: z.string(),
        amount: z.string().nullable(),
        to: z.string().nullable(),
        tx_hash: z.string().nullable(),
        error_code: z.string().nullable(),
        updated_at: timestamp,
      }),
    ),
  }),
  /** By whatever states the table holds. */
  x402_settlements: z.object({ by_state: z.array(z.object({ state: z.string(), count })) }),
  funding_exceptions: z.object({
    active: z.array(
      z.object({
        id: z.string(),
        wallet: z.string(),
        ceiling_units: z.string(),
        reason: z.string(),
        approved_at: timestamp,
        expires_at: timestamp,
      }),
    ),
  }),
});
export type OperationsOverview = z.infer<typeof operationsOverviewSchema>;

export const AUDIT_KINDS = [
  "registration_setting",
  "identity",
  "funding_exception",
  "webhook_endpoint",
  "passkey_approval",
  "passkey_revocation",
] as const;

/** GET {base}/admin/agents/audit: every recorded change, newest first. */
export const auditSchema = z.object({
  /** Said on the page too: who a change names, and when it names no one. */
  note: z.string(),
  changes: z.array(
    z.object({
      kind: z.enum(AUDIT_KINDS),
      /** The setting name, the agent id, the funding exception id, or the webhook endpoint id. */
      subject: z.string(),
      change: z.string(),
      before: z.string().nullable(),
      after: z.string(),
      reason: z.string(),
      /** The channel the change came through, when recorded (console or cli). */
      source: z.string().nullable(),
      /**
       * The operator signed in with a passkey who made the change, or whose passkey approved it;
       * null for the shared admin tokens and the operator tools.
       */
      operator: z.string().nullable(),
      /** That operator's passkey (its key id); null with operator. */
      passkey_key_id: z.string().nullable(),
      at: timestamp,
    }),
  ),
});
export type Audit = z.infer<typeof auditSchema>;

const webhookEndpointSchema = z.object({
  id: z.uuid(),
  url: z.string(),
  events: z.array(z.string()),
  enabled: z.boolean(),
  /** Why it is disabled: a receiver's 410 Gone, for one. */
  disabled_reason: z.string().nullable(),
  created_at: timestamp,
});

/** One delivery of an event to an endpoint, as its last attempt left it. */
export const webhookDeliverySchema = z.object({
  /** The `webhook-id` header of every attempt of this delivery. */
  webhook_id: z.string(),
  event_id: z.string(),
  /** Null once the event left the log (retention). */
  event_type: z.string().nullable(),
  status: z.enum(["pending", "delivered", "failed", "disabled"]),
  attempts: count,
  last_http_status: z.number().int().nullable(),
  last_error: z.string().nullable(),
  /** When the next attempt is due; pending deliveries only. */
  next_attempt_at: timestamp.nullable(),
  delivered_at: timestamp.nullable(),
  created_at: timestamp,
});

/** GET {base}/admin/agents/webhooks: every endpoint (never its secret) with its latest deliveries. */
export const webhooksOverviewSchema = z.object({
  /** The types an endpoint may subscribe to. */
  event_types: z.array(z.string()),
  /** AGENT_WEBHOOKS_MAX_PENDING: the pending deliveries an endpoint may have. */
  max_pending: count,
  endpoints: z.array(
    webhookEndpointSchema.extend({
      /** Its pending deliveries: queued, or waiting for a retry. */
      pending: count,
      /** At max_pending: nothing more is queued for it until deliveries end; it keeps its place. */
      at_bound: z.boolean(),
      deliveries: z.array(webhookDeliverySchema),
    }),
  ),
});
export type WebhooksOverview = z.infer<typeof webhooksOverviewSchema>;

/** The added endpoint with its secret: shown in this answer once (and a new one on a rotation). */
export const webhookAddResponseSchema = webhookEndpointSchema.extend({
  secret: z.string().describe("whsec_ and base64: shown once, kept by the receiver to verify v1"),
});
export type WebhookAddResponse = z.infer<typeof webhookAddResponseSchema>;

export const webhookRemoveResponseSchema = z.object({ id: z.uuid(), removed: z.literal(true) });
export type WebhookRemoveResponse = z.infer<typeof webhookRemoveResponseSchema>;

export const webhookReplayResponseSchema = z.object({ id: z.uuid(), queued: count });
export type WebhookReplayResponse = z.infer<typeof webhookReplayResponseSchema>;

/** The endpoint's new secret: shown in this answer once, as an added endpoint's is. */
export const webhookRotateSecretResponseSchema = z.object({
  id: z.uuid(),
  secret: z.string().describe("whsec_ and base64: shown once, kept by the receiver to verify v1"),
  previous_secret_until: z.string().describe("when the secret it replaces stops signing beside it"),
});
export type WebhookRotateSecretResponse = z.infer<typeof webhookRotateSecretResponseSchema>;
