/**
 * The origin's fan-out of the event log (docs/events.md#fan-out): one reader for every stream and
 * wait on this origin, whichever origin wrote the events. It reads when the listener hears a
 * notification and at least once a second (the fallback when a pooler breaks `LISTEN`), with one
 * query for all subscribed agents from its own cursor, and hands each event to its agent's
 * subscribers. Started by the first subscription, so an origin nobody follows reads nothing.
 */
import type { Db, DirectConnection } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import { atMostEvery, startLoop, type WakeableWorker, type WorkerTicks } from "../workers/loop.ts";
import { type Cursor, compareCursors, horizonCursor, laterCursor } from "./cursor.ts";
import { type EventListener, startEventListener } from "./listener.ts";
import { currentHorizon, type LoggedEvent, readServable, untilOnDisk } from "./store.ts";

/** Events read per query; a longer run is read in several, each from the last one's end. */
const READ_BATCH = 1_000;
/**
 * A notification can arrive before its event is servable (an older transaction still runs), so
 * one more read follows it shortly rather than a whole poll period later.
 */
const FOLLOW_UP_MS = 100;
/** The least time between two reads the listener's notifications start. */
const WAKE_GAP_MS = 20;

export type EventFeedParams = {
  db: Db;
  connectDirect: () => DirectConnection;
  logger: Logger;
  /** The poll period, ms: 1 s. */
  pollMs?: number;
};

export type FeedSubscription = {
  /**
   * The feed's cursor when the subscription joined: it hands on only events after it, and every
   * event at or before it has ended, so a reader of the log up to here and the feed after it see
   * each event exactly once (origin/events/stream.ts).
   */
  bound: Cursor;
  unsubscribe(): void;
};

export type EventFeed = {
  subscribe(agentId: string, deliver: (event: LoggedEvent) => void): Promise<FeedSubscription>;
  /** Open subscriptions (streams and waits), for tests and metrics. */
  size(): number;
  /** Reads now (tests; the listener's wake). */
  wake(): void;
  /**
   * The reads of the log it has ended (origin_events_feed_reads_total): a test that asserts that
   * nothing more reaches a stream waits for reads, which a fixed sleep cannot promise on a loaded
   * machine.
   */
  reads(): WorkerTicks;
  /**
   * Calls `onWake` whenever the origin's listener hears that events were written (and shortly
   * after, as the feed reads again), starting the listener if nobody follows the feed yet: other
   * readers of the log (the webhooks' fan-out) share its one `LISTEN` connection. Returns the
   * unsubscription.
   */
  onEventsWritten(onWake: () => void): () => void;
  stop(): Promise<void>;
};

export function createEventFeed(params: EventFeedParams): EventFeed {
  const { db, logger } = params;
  const subscribers = new Map<string, Set<(event: LoggedEvent) => void>>();
  let cursor: Cursor | undefined;
  /** The read or cursor set-up in progress: a subscription joins only between them. */
  let inFlight: Promise<void> | undefined;
  let loop: WakeableWorker | undefined;
  let listener: EventListener | undefined;
  let followUp: NodeJS.Timeout | undefined;
  let stopped = false;
  const watchers = new Set<() => void>();

  const exclusive = async (work: () => Promise<void>): Promise<void> => {
    while (inFlight) await inFlight.catch(() => {});
    const run = work();
    inFlight = run;
    try {
      await run;
    } finally {
      if (inFlight === run) inFlight = undefined;
    }
  };

  const readNew = async (): Promise<void> => {
    cursor ??= await currentHorizon(db);
    const agentIds = [...subscribers.keys()];
    for (;;) {
      const { events, horizon, wal } = await readServable(db, { agentIds, after: cursor, limit: READ_BATCH });
      await untilOnDisk(db, wal);
      for (const event of events) {
        // The read asked for these agents' events only: a node event (no agent) never comes here.
        const agentSubscribers = event.agentId === null ? undefined : subscribers.get(event.agentId);
        for (const deliver of agentSubscribers ?? []) deliver(event);
        cursor = { xid: event.xid, id: event.id };
      }
      if (events.length < READ_BATCH) {
        // Every event below the horizon was visible to this read: none of these agents' can follow.
        cursor = laterCursor(cursor, horizonCursor(horizon));
        return;
      }
    }
  };

  // Every commit that writes events notifies: under load the reads and the watchers' work run at
  // most every WAKE_GAP_MS, each taking everything since the last, rather than once per commit.
  const wakeAll = atMostEvery(WAKE_GAP_MS, (): void => {
    loop?.wake();
    for (const watcher of watchers) watcher();
  });

  const listen = (): void => {
    if (listener || stopped) return;
    listener = startEventListener({
      connect: params.connectDirect,
      logger,
      onWake: () => {
        wakeAll();
        clearTimeout(followUp);
        followUp = setTimeout(wakeAll, FOLLOW_UP_MS);
      },
    });
  };

  const start = (): void => {
    if (loop || stopped) return;
    loop = startLoop("events_feed", params.pollMs ?? 1_000, logger, () => exclusive(readNew));
    listen();
  };

  return {
    async subscribe(agentId, deliver) {
      start();
      // Joins between reads: a read in flight was started without this agent, and may move the
      // cursor past events only the subscription's own backlog read can then see.
      for (;;) {
        if (inFlight) {
          await inFlight.catch(() => {});
        } else if (!cursor) {
          await exclusive(async () => {
            cursor ??= await currentHorizon(db);
          });
        } else {
          break;
        }
      }
      let set = subscribers.get(agentId);
      if (!set) {
        set = new Set();
        subscribers.set(agentId, set);
      }
      set.add(deliver);
      const bound = cursor;
      return {
        bound,
        unsubscribe() {
          const current = subscribers.get(agentId);
          current?.delete(deliver);
          if (current?.size === 0) subscribers.delete(agentId);
        },
      };
    },
    size: () => [...subscribers.values()].reduce((sum, set) => sum + set.size, 0),
    wake: () => loop?.wake(),
    reads: () => loop?.ticks() ?? { ok: 0, failed: 0 },
    onEventsWritten(onWake) {
      watchers.add(onWake);
      listen();
      return () => {
        watchers.delete(onWake);
      };
    },
    async stop() {
      stopped = true;
      watchers.clear();
      clearTimeout(followUp);
      wakeAll.cancel();
      await Promise.all([loop?.stop(), listener?.stop()]);
      subscribers.clear();
    },
  };
}

/** Whether `event` comes after `cursor` (a stream's filter against repeats). */
export function isAfter(event: Cursor, cursor: Cursor): boolean {
  return compareCursors(event, cursor) > 0;
}
