/**
 * The delivery worker's slots (docs/operations.md#webhooks): claim what is due into the free slots,
 * send each, record what each came to, and free its slot as soon as it ends, so one that waits out
 * the timeout holds its own slot and no other. 2xx delivered; 410 disables the endpoint; anything
 * else (a 3xx included, a timeout, a refused address) is retried on the schedule.
 */
import { errorMessage } from "../../shared/error-message.ts";
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
  slots: number;
  /** Sends at once to one endpoint, at most; fewer when more endpoints have work (deliveries.ts). */
  perEndpoint: number;
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

/** The worker's slots: filled by its ticks, each freed as its delivery ends. */
export type DeliveryPool = {
  /**
   * Claims due deliveries into the free slots and starts them, until the slots are full or no more
   * can be claimed; returns how many it claimed. Does not wait for the sends.
   */
  fill(): Promise<number>;
  /** Waits until every delivery started has ended (the worker's stop). */
  drain(): Promise<void>;
};

export type DeliveryPoolParams = DeliverDeps & {
  /** Told when a delivery has ended and its outcome is recorded: a slot is free. */
  onEnded?: () => void;
};

/**
 * The delivery worker's `deps.slots` slots. Each claim asks for the free ones and gives each endpoint
 * no more than its share (claimDueDeliveries), counting what this pool has in flight to it.
 */
export function createDeliveryPool(deps: DeliveryPoolParams): DeliveryPool {
  // Longer than any attempt can take (send.ts ends each at the timeout), so the lease outlives the send.
  const leaseSeconds = Math.ceil(deps.timeoutMs / 1000) + 30;
  const inFlight = new Map<string, number>();
  const running = new Set<Promise<void>>();
  // Claims and outcomes go one statement at a time, each as soon as it can: the sends run in
  // parallel, but the delivery worker never holds more than one pool connection, whatever the
  // receivers do (the pool is the money path's too).
  let statements: Promise<unknown> = Promise.resolve();
  const serial = <T>(statement: () => Promise<T>): Promise<T> => {
    const next = statements.then(statement);
    statements = next.catch(() => {});
    return next;
  };
  const count = (endpointId: string, by: number): void => {
    const n = (inFlight.get(endpointId) ?? 0) + by;
    if (n > 0) inFlight.set(endpointId, n);
    else inFlight.delete(endpointId);
  };
  const send = async (delivery: ClaimedDelivery): Promise<void> => {
    // The slot is held until the attempt's connection is closed, not only until its status came: a
    // receiver that answers and never ends its body keeps the connection to the timeout (send.ts),
    // and freeing the slot at the status let the pool open one such connection per delivery, its
    // whole backlog at once, where a receiver that hangs holds only its share of the slots.
    let closed!: () => void;
    const connectionClosed = new Promise<void>((resolve) => {
      closed = resolve;
    });
    const outcome = await attempt(deps, delivery, closed);
    await serial(() =>
      recordAttempt(deps.db, {
        delivery,
        outcome,
        retrySeconds: deps.retrySeconds,
        random: (deps.random ?? Math.random)(),
        leaseSeconds,
      }),
    );
    if (outcome.kind !== "delivered") {
      // The URL and the reason only: never the secret, the key or the body.
      deps.logger.warn(
        { endpoint: delivery.endpointId, delivery: delivery.id.toString(), outcome: describe(outcome) },
        "webhook delivery not delivered",
      );
    }
    await connectionClosed;
  };
  const start = (delivery: ClaimedDelivery): void => {
    count(delivery.endpointId, 1);
    const run: Promise<void> = send(delivery)
      .catch((error: unknown) => {
        // Its outcome is not recorded: the lease runs out and it is sent again (at least once).
        deps.logger.error(
          {
            endpoint: delivery.endpointId,
            delivery: delivery.id.toString(),
            err: { message: errorMessage(error) },
          },
          "webhook delivery outcome not recorded",
        );
      })
      .finally(() => {
        count(delivery.endpointId, -1);
        running.delete(run);
        deps.onEnded?.();
      });
    running.add(run);
  };
  return {
    async fill() {
      let claimed = 0;
      for (;;) {
        const free = deps.slots - running.size;
        if (free <= 0) return claimed;
        const batch = await serial(() =>
          claimDueDeliveries(deps.db, {
            limit: free,
            leaseSeconds,
            slots: deps.slots,
            perEndpoint: deps.perEndpoint,
            inFlight,
          }),
        );
        for (const delivery of batch) start(delivery);
        claimed += batch.length;
        // Fewer than asked: nothing more is due, or what is due is its endpoint's share past.
        if (batch.length < free) return claimed;
      }
    },
    async drain() {
      while (running.size > 0) await Promise.all(running);
    },
  };
}

/** One attempt of a claimed delivery; `onClosed` is told once it holds no connection (send.ts). */
async function attempt(
  deps: DeliverDeps,
  delivery: ClaimedDelivery,
  onClosed: () => void,
): Promise<AttemptOutcome> {
  if (!delivery.endpointEnabled) {
    onClosed();
    return { kind: "dropped", status: "disabled", error: "endpoint disabled" };
  }
  if (!delivery.event) {
    onClosed();
    return { kind: "dropped", status: "failed", error: "the event left the log" };
  }
  const body = webhookBody(delivery.event);
  const webhookId = webhookIdOf(delivery.id);
  const timestamp = Math.floor((deps.now?.() ?? new Date()).getTime() / 1000);
  const sent = await sendWebhook({
    url: delivery.url,
    body,
    timeoutMs: deps.timeoutMs,
    allowPrivate: deps.allowPrivate,
    resolve: deps.resolve,
    onClosed,
    headers: {
      "webhook-id": webhookId,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": signatureHeader({
        secrets: delivery.secrets,
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
