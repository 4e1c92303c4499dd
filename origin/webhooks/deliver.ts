/**
 * The delivery worker's tick (docs/operations.md#webhooks): claim what is due, send each with a
 * bounded concurrency, record what each came to. 2xx delivered; 410 disables the endpoint;
 * anything else (a 3xx included, a timeout, a refused address) is retried on the schedule.
 */
import type { Db } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import type { Resolve } from "./address-guard.ts";
import {
  type AttemptOutcome,
  type ClaimedDelivery,
  claimDueDeliveries,
  recordAttempt,
} from "./deliveries.ts";
import { parseRetryAfter, RETRY_AFTER_STATUSES } from "./retry-delay.ts";
import { sendWebhook } from "./send.ts";
import { signatureHeader, type WebhookSigningKey } from "./signing.ts";

export type DeliverDeps = {
  db: Db;
  logger: Logger;
  /** The signing keys, newest first (signing.ts). */
  keys: readonly WebhookSigningKey[];
  retrySeconds: readonly number[];
  timeoutMs: number;
  allowPrivate: boolean;
  /** Sends at once per origin, at most. */
  concurrency: number;
  resolve?: Resolve;
  now?: () => Date;
  /** The jitter's source: Math.random unless a test fixes it. */
  random?: () => number;
};

/** The `webhook-id`: one per (endpoint, event), the same on every attempt, with no `.` in it. */
export function webhookIdOf(deliveryId: bigint): string {
  return `msg_${deliveryId}`;
}

/**
 * The body: the event's type and time, and its data with `event_id`, the log's id as a decimal
 * string (a bigint may pass 2^53; docs/api.md#webhooks).
 */
export function webhookBody(event: NonNullable<ClaimedDelivery["event"]>): string {
  return JSON.stringify({
    type: event.type,
    timestamp: event.occurredAt,
    data: { ...event.data, event_id: event.id.toString() },
  });
}

/** Runs one claim and its sends; returns how many were claimed (a full batch: call again). */
export async function deliverDue(deps: DeliverDeps): Promise<number> {
  // Longer than any attempt can take, so the lease outlives the send.
  const leaseSeconds = Math.ceil(deps.timeoutMs / 1000) + 30;
  const claimed = await claimDueDeliveries(deps.db, { limit: deps.concurrency, leaseSeconds });
  // Outcomes are recorded one statement at a time, each as soon as its send ends: the sends run
  // in parallel, but the delivery worker never holds more than one pool connection, whatever
  // the receivers do (the pool is the money path's too).
  let recording: Promise<void> = Promise.resolve();
  const record = (delivery: ClaimedDelivery, outcome: AttemptOutcome): Promise<void> => {
    const next = recording.then(() =>
      recordAttempt(deps.db, {
        delivery,
        outcome,
        retrySeconds: deps.retrySeconds,
        random: (deps.random ?? Math.random)(),
        leaseSeconds,
      }),
    );
    recording = next.catch(() => {});
    return next;
  };
  await Promise.all(
    claimed.map(async (delivery) => {
      const outcome = await attempt(deps, delivery);
      await record(delivery, outcome);
      if (outcome.kind !== "delivered") {
        // The URL and the reason only: never the secret, the key or the body.
        deps.logger.warn(
          { endpoint: delivery.endpointId, delivery: delivery.id.toString(), outcome: describe(outcome) },
          "webhook delivery not delivered",
        );
      }
    }),
  );
  return claimed.length;
}

async function attempt(deps: DeliverDeps, delivery: ClaimedDelivery): Promise<AttemptOutcome> {
  if (!delivery.endpointEnabled) return { kind: "dropped", status: "disabled", error: "endpoint disabled" };
  if (!delivery.event) return { kind: "dropped", status: "failed", error: "the event left the log" };
  const body = webhookBody(delivery.event);
  const webhookId = webhookIdOf(delivery.id);
  const timestamp = Math.floor((deps.now?.() ?? new Date()).getTime() / 1000);
  const sent = await sendWebhook({
    url: delivery.url,
    body,
    timeoutMs: deps.timeoutMs,
    allowPrivate: deps.allowPrivate,
    resolve: deps.resolve,
    headers: {
      "webhook-id": webhookId,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": signatureHeader({
        secret: delivery.secret,
        keys: deps.keys,
        webhookId,
        timestamp,
        body,
      }),
      "user-agent": "agent-wallet-webhooks",
    },
  });
  if (!sent.ok)
    return { kind: "failed", httpStatus: undefined, error: sent.error, retryAfterSeconds: undefined };
  if (sent.status >= 200 && sent.status < 300) return { kind: "delivered", httpStatus: sent.status };
  if (sent.status === 410) return { kind: "gone", httpStatus: sent.status };
  return {
    kind: "failed",
    httpStatus: sent.status,
    error: `the receiver answered ${sent.status}`,
    retryAfterSeconds: RETRY_AFTER_STATUSES.has(sent.status)
      ? parseRetryAfter(sent.retryAfter, deps.now?.() ?? new Date())
      : undefined,
  };
}

function describe(outcome: AttemptOutcome): string {
  switch (outcome.kind) {
    case "delivered":
    case "gone":
      return `${outcome.kind} ${outcome.httpStatus}`;
    case "failed":
      return outcome.error;
    case "dropped":
      return `${outcome.status}: ${outcome.error}`;
  }
}
