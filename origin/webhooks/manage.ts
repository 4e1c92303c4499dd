/**
 * The operator's changes of webhook endpoints, one implementation for both channels, the console
 * and `npm run webhooks` (docs/operations.md#webhooks): each checks what it is given, makes the
 * change and records it with before, after and reason in the same transaction, like the other
 * operator changes (docs/api.md#the-operator-console).
 */
import { sql } from "drizzle-orm";
import type { Operator } from "../../shared/operator.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { type Db, queryRows } from "../db/client.ts";
import { checkWebhookUrl, type Resolve, type UrlCheck } from "./address-guard.ts";
import {
  addEndpoint,
  type ReplayScope,
  type RotatedSecret,
  removeEndpoint,
  replayEndpoint,
  rotateEndpointSecret,
  type WebhookEndpoint,
} from "./endpoints.ts";

/** Where a change came from: a channel; who, when known, is the change's `operator`. */
export type WebhookChangeSource = "console" | "cli";

export type WebhookChange = {
  /** Required from the console (its request schema); the CLI may leave it out. */
  reason: string | undefined;
  source: WebhookChangeSource;
  /**
   * The operator signed in with a passkey who made the change (docs/operations.md#signing-in-with-a-passkey);
   * null or absent for the shared admin tokens and the CLI.
   */
  operator?: Operator | null;
};

export type UrlRefusal = Extract<UrlCheck, { ok: false }>;

export type AddWebhookParams = {
  url: string;
  events: readonly string[];
  allowPrivate: boolean;
  resolve?: Resolve;
  change: WebhookChange;
};

const described = (endpoint: { url: string; events: readonly string[] }): string =>
  `${endpoint.url} (${endpoint.events.join(",")})`;

async function record(
  db: Db,
  params: {
    endpointId: string;
    change: "add" | "remove" | "replay" | "rotate_secret";
    before: string | null;
    after: string;
  },
  change: WebhookChange,
): Promise<void> {
  const reason = change.reason?.trim() || null;
  await db.execute(
    sql`insert into webhook_endpoint_changes
          (endpoint_id, change, before, after, reason, source, operator, passkey_key_id)
        values (${params.endpointId}::uuid, ${params.change}, ${params.before}, ${params.after},
                ${reason}, ${change.source}, ${change.operator?.name ?? null}, ${change.operator?.keyId ?? null})`,
  );
}

/**
 * Adds an endpoint after the delivery's own URL rule (checkWebhookUrl: the name is resolved now,
 * and again at every delivery). The secret is in the answer, and never again.
 */
export async function addWebhookEndpoint(
  db: Db,
  params: AddWebhookParams,
): Promise<Result<WebhookEndpoint & { secret: string }, UrlRefusal>> {
  const checked = await checkWebhookUrl(params.url, {
    allowPrivate: params.allowPrivate,
    resolve: params.resolve,
  });
  if (!checked.ok) return err(checked);
  const endpoint = await db.transaction(async (tx) => {
    const t = tx as unknown as Db;
    const added = await addEndpoint(t, { url: params.url, events: params.events });
    await record(
      t,
      { endpointId: added.id, change: "add", before: null, after: described(added) },
      params.change,
    );
    return added;
  });
  return ok(endpoint);
}

/** Removes an endpoint and its deliveries; false when there is none. */
export async function removeWebhookEndpoint(
  db: Db,
  params: { id: string; change: WebhookChange },
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const t = tx as unknown as Db;
    const [before] = await queryRows<{ url: string; event_types: string[] }>(
      t,
      sql`select url, event_types from webhook_endpoints where id = ${params.id}::uuid for update`,
    );
    if (!before || !(await removeEndpoint(t, params.id))) return false;
    await record(
      t,
      {
        endpointId: params.id,
        change: "remove",
        before: described({ url: before.url, events: before.event_types }),
        after: "removed",
      },
      params.change,
    );
    return true;
  });
}

const scopeText = (scope: ReplayScope): string =>
  scope.kind === "all"
    ? "every event since it was added"
    : scope.kind === "from"
      ? `events from ${scope.eventId}`
      : `event ${scope.eventId}`;

/**
 * Queues an endpoint's events in `scope` again (endpoints.ts replayEndpoint: the same webhook-id
 * for a delivery it had) and enables it. Returns how many, or undefined when there is no endpoint.
 */
export async function replayWebhookEndpoint(
  db: Db,
  params: {
    id: string;
    scope: ReplayScope;
    change: WebhookChange;
    /** AGENT_WEBHOOKS_RETRY_SECONDS's first entry: a replay starts the schedule from its start. */
    firstAttemptSeconds: number;
  },
): Promise<number | undefined> {
  return db.transaction(async (tx) => {
    const t = tx as unknown as Db;
    const [before] = await queryRows<{ enabled: boolean; disabled_reason: string | null }>(
      t,
      sql`select enabled, disabled_reason from webhook_endpoints where id = ${params.id}::uuid for update`,
    );
    if (!before) return undefined;
    const queued = await replayEndpoint(t, {
      id: params.id,
      scope: params.scope,
      firstAttemptSeconds: params.firstAttemptSeconds,
    });
    if (queued === undefined) return undefined;
    await record(
      t,
      {
        endpointId: params.id,
        change: "replay",
        before: before.enabled ? "enabled" : `disabled (${before.disabled_reason ?? "no reason"})`,
        after: `enabled; ${queued} deliveries queued: ${scopeText(params.scope)}`,
      },
      params.change,
    );
    return queued;
  });
}

/**
 * Gives an endpoint a new secret (endpoints.ts rotateEndpointSecret), the old one signing beside it
 * for `overlapSeconds`, and records the change (never either secret). Undefined when there is no
 * endpoint.
 */
export async function rotateWebhookEndpointSecret(
  db: Db,
  params: { id: string; overlapSeconds: number; change: WebhookChange },
): Promise<RotatedSecret | undefined> {
  return db.transaction(async (tx) => {
    const t = tx as unknown as Db;
    const rotated = await rotateEndpointSecret(t, { id: params.id, overlapSeconds: params.overlapSeconds });
    if (!rotated) return undefined;
    await record(
      t,
      {
        endpointId: params.id,
        change: "rotate_secret",
        before: "secret",
        after: `new secret; the old one signs beside it until ${rotated.previousUntil}`,
      },
      params.change,
    );
    return rotated;
  });
}
