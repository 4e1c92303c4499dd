/**
 * The event log's capability (docs/events.md): the agent's stream and the action wait, handed to
 * the gateway (which mounts them behind its auth), and the retention sweep. The triggers of
 * migration 0016 write the log; nothing here is on the money path.
 */
import type { Handler } from "hono";
import { type Capability, capability } from "../capability.ts";
import type { AppEnv } from "../http/env.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { startLoop } from "../workers/loop.ts";
import { type ActionWaiter, createActionWaiter } from "./action-wait.ts";
import { createEventFeed, type EventFeed } from "./feed.ts";
import { sweepExpiredEvents } from "./retention.ts";
import type { EventStream } from "./stream.ts";
import { createStreamCap } from "./stream-cap.ts";
import { eventsStreamHandler } from "./stream-route.ts";

/** How often the retention sweep runs. */
const SWEEP_PERIOD_MS = 60 * 60_000;

/** What the gateway mounts: GET /agent/v1/events, and the wait of GET /agent/v1/actions/{id}. */
export type EventsHandlers = { stream: Handler<AppEnv>; waiter: ActionWaiter };

export type EventsModule = {
  capability: Capability;
  handlers: EventsHandlers;
  /** The origin's fan-out (tests read how many follow it). */
  feed: EventFeed;
};

export type EventsModuleOptions = {
  /** The stream's keep-alive comment period (tests shorten it). */
  pingIntervalMs?: number;
  /** The feed's poll period (feed.ts `pollMs`, a second; tests shorten it). */
  feedPollMs?: number;
};

export function createEventsModule(infra: Infrastructure, options: EventsModuleOptions = {}): EventsModule {
  const { config, logger } = infra;
  const db = infra.database.db;
  const feed = createEventFeed({
    db,
    connectDirect: infra.database.connectDirect,
    logger,
    pollMs: options.feedPollMs,
  });
  const waiter = createActionWaiter(feed);
  infra.metrics.followActionWaits(() => waiter.held());
  infra.metrics.followEventFeedReads(() => feed.reads());
  const open = new Set<EventStream>();
  const stream = eventsStreamHandler({
    db,
    feed,
    cap: createStreamCap(config.events.streamsPerToken),
    open,
    logger,
    pingIntervalMs: options.pingIntervalMs,
  });
  return {
    feed,
    handlers: { stream, waiter },
    capability: capability("events", {
      workers: () => [
        startLoop("events_retention", SWEEP_PERIOD_MS, logger, async () => {
          const deleted = await sweepExpiredEvents(db, config.events.retentionDays);
          if (deleted > 0) logger.info({ deleted }, "events past retention deleted");
        }),
      ],
      endStreams() {
        for (const each of open) each.close("shutting_down");
        // The `?wait=` requests too: each answered with its action as it stands, not cut by the drain.
        waiter.release();
      },
      async stop() {
        for (const each of open) each.close("shutting_down");
        await feed.stop();
      },
    }),
  };
}
