/**
 * Webhooks (docs/operations.md#webhooks): the public key route, the fan-out from the event log and
 * the delivery worker. Nothing here is on the request path of the money routes: the workers use
 * short statements on the pool and hold no connection while a receiver answers.
 */
import { Hono } from "hono";
import { type Capability, capability } from "../capability.ts";
import type { EventFeed } from "../events/feed.ts";
import type { AppEnv } from "../http/env.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { route } from "../openapi/route.ts";
import { atMostEvery, startLoop, type Worker } from "../workers/loop.ts";
import type { Resolve } from "./address-guard.ts";
import { createDeliveryPool } from "./deliver.ts";
import { fanOutOnce } from "./fan-out.ts";
import { sweepExpiredDeliveries } from "./retention.ts";
import type { WebhookSigningKey } from "./signing.ts";

/** How often the fan-out looks at the log and the worker for due deliveries. */
const PERIOD_MS = 1_000;
/** The least time between two fan-outs the events listener starts. */
const FAN_OUT_WAKE_GAP_MS = 100;
/** Deliveries one origin sends at once. */
const SLOTS = 16;
/**
 * Deliveries one origin sends at once to one endpoint: the eight all went to one endpoint before
 * there were slots. Fewer when more endpoints have work: each gets its share of SLOTS (deliveries.ts).
 */
const PER_ENDPOINT = 8;
/** How often the deliveries log is swept (as the event log is). */
const SWEEP_PERIOD_MS = 60 * 60_000;

export type WebhooksModuleOptions = {
  /** The resolver of the address checks (tests swap in one that changes its answer). */
  resolve?: Resolve;
  /** The fan-out's poll period, ms (a test lengthens it to see the listener's wake alone). */
  fanOutPollMs?: number;
};

/** What the fan-out needs of the event log's feed: to hear, on the origin's one LISTEN, that events were written. */
export type EventsWritten = Pick<EventFeed, "onEventsWritten">;

/**
 * Without a signing key (AGENT_WEBHOOKS_SIGNING_KEY_FILE unset) the key set is empty and no delivery worker
 * runs: deliveries wait in the database until an origin with a key starts.
 */
export function createWebhooksModule(
  infra: Infrastructure,
  signingKeys: readonly WebhookSigningKey[],
  events: EventsWritten,
  options: WebhooksModuleOptions = {},
): Capability {
  const { config, logger } = infra;
  const db = infra.database.db;
  const router = new Hono<AppEnv>();
  const keys = { keys: signingKeys.map((each) => each.jwk) };
  route(router, "/", "webhookKeys", (c) => {
    c.header("cache-control", "public, max-age=300");
    return c.json(keys);
  });
  return capability("webhooks", {
    routes: [{ path: "/", router }],
    workers: (): Worker[] => {
      const retention = startLoop("webhooks_retention", SWEEP_PERIOD_MS, logger, async () => {
        const deleted = await sweepExpiredDeliveries(db, config.events.retentionDays);
        if (deleted > 0) logger.info({ deleted }, "webhook deliveries past retention deleted");
      });
      if (signingKeys.length === 0) {
        logger.warn("AGENT_WEBHOOKS_SIGNING_KEY_FILE is not set: webhooks are queued but not delivered");
        return [retention];
      }
      /** Whether the fan-out's last run left an endpoint at its bound (AGENT_WEBHOOKS_MAX_PENDING). */
      let someAtBound = false;
      const pool = createDeliveryPool({
        db,
        logger,
        keys: signingKeys,
        retrySeconds: config.webhooks.retrySeconds,
        timeoutMs: config.webhooks.timeoutMs,
        allowPrivate: config.webhooks.allowPrivate,
        slots: SLOTS,
        perEndpoint: PER_ENDPOINT,
        resolve: options.resolve,
        // A slot is free as soon as its delivery ends: claim into it at once, not a period later
        // and not once the slowest of a batch is done.
        onEnded() {
          deliver.wake();
          // An endpoint at its bound is read for again as soon as deliveries end, not a poll later.
          if (someAtBound) wakeFanOut();
        },
      });
      const deliver = startLoop("webhooks_delivery", PERIOD_MS, logger, async () => {
        await pool.fill();
      });
      const fanOut = startLoop("webhooks_fan_out", options.fanOutPollMs ?? PERIOD_MS, logger, async () => {
        const result = await fanOutOnce(db, {
          maxPending: config.webhooks.maxPending,
          firstAttemptSeconds: config.webhooks.retrySeconds[0] ?? 0,
        });
        // A run that throws is a failed tick of this worker (origin_worker_ticks_total).
        infra.metrics.fanOutRun(result.ran ? "ran" : "skipped");
        if (!result.ran) return;
        someAtBound = result.atBound > 0;
        for (const endpoint of result.behindRetention) {
          logger.warn(
            { endpoint, retention_days: config.events.retentionDays },
            "webhook endpoint behind the event log's retention: events after its place older than AGENT_EVENTS_RETENTION_DAYS may have been deleted before they were queued",
          );
        }
        if (result.deliveries > 0) deliver.wake();
      });
      // A delivery starts as the event commits, not a poll period later: the origin's events
      // listener wakes the fan-out (the poll stays, for poolers that break LISTEN). At most every
      // FAN_OUT_WAKE_GAP_MS: each run is a transaction, and the money path commits hundreds of
      // events a second (bench:money measured a fan-out per commit costing 40 % of its rate).
      const wakeFanOut = atMostEvery(FAN_OUT_WAKE_GAP_MS, () => fanOut.wake());
      const unwatch = events.onEventsWritten(wakeFanOut);
      return [
        {
          name: fanOut.name,
          ticks: fanOut.ticks,
          async stop() {
            unwatch();
            wakeFanOut.cancel();
            await fanOut.stop();
          },
        },
        {
          name: deliver.name,
          ticks: deliver.ticks,
          async stop() {
            await deliver.stop();
            // The sends under way end within the timeout; their outcomes are recorded first.
            await pool.drain();
          },
        },
        retention,
      ];
    },
  });
}
