/**
 * `?wait=SECONDS` on GET {base}/agent/v1/actions/{id} (docs/events.md#waiting-for-an-action): the
 * request follows its agent's events on the feed and answers on the first one of that action with
 * another status than it read, or when the wait ends. It holds no database connection meanwhile.
 */
import type { EventFeed } from "./feed.ts";
import type { LoggedEvent } from "./store.ts";

/**
 * Waits one origin holds at once; past it a wait answers at once, as `wait=0` does (the per-agent
 * request limit already bounds one agent's share).
 */
export const MAX_WAITING = 10_000;

export type ActionWatch = {
  /**
   * Resolves when an event of the action names another status than `status`, when `ms` have
   * passed, or when `signal` aborts (the client left). The events heard are then used up: the next
   * call waits for new ones. An event may be history served late (the log is served in transaction
   * order, docs/events.md#order): the caller reads the action again to know.
   */
  changed(status: string, ms: number, signal: AbortSignal): Promise<void>;
  close(): void;
};

export type ActionWaiter = {
  /** Follows the action's events from now; undefined when the origin holds MAX_WAITING already. */
  watch(agentId: string, actionId: string): Promise<ActionWatch | undefined>;
  waiting(): number;
  /**
   * Waits inside `changed`: requests that have read their action and wait for a change, so a change
   * written now wakes them (the metric origin_events_action_waits).
   */
  held(): number;
  /**
   * The origin stops: every wait ends now, and any later one at once, so each request is answered
   * with its action as it stands rather than cut by the drain's end (main.ts's shutdown).
   */
  release(): void;
  /** Whether release() was called: a wait woken by it must not wait again. */
  released(): boolean;
};

export function createActionWaiter(feed: EventFeed, maxWaiting: number = MAX_WAITING): ActionWaiter {
  let waiting = 0;
  let held = 0;
  let released = false;
  /** The ends of the waits in progress, for release(). */
  const ends = new Set<() => void>();
  return {
    waiting: () => waiting,
    held: () => held,
    released: () => released,
    release() {
      released = true;
      for (const end of [...ends]) end();
    },
    async watch(agentId, actionId) {
      if (waiting >= maxWaiting) return undefined;
      waiting++;
      const seen: string[] = [];
      let notify: (() => void) | undefined;
      const deliver = (event: LoggedEvent): void => {
        const data = event.data as { action_id?: unknown; status?: unknown } | null;
        if (data?.action_id !== actionId || typeof data.status !== "string") return;
        seen.push(data.status);
        notify?.();
      };
      let subscription: Awaited<ReturnType<EventFeed["subscribe"]>>;
      try {
        // Subscribed before the caller reads the action, so a change after that read is heard.
        subscription = await feed.subscribe(agentId, deliver);
      } catch (error) {
        waiting--;
        throw error;
      }
      let closed = false;
      return {
        changed(status, ms, signal) {
          return new Promise<void>((resolve) => {
            const done = (): void => {
              ends.delete(done);
              held--;
              clearTimeout(timer);
              signal.removeEventListener("abort", done);
              notify = undefined;
              seen.length = 0;
              resolve();
            };
            // An event of the status already read is the one that made it (served late): not a change.
            const check = (): void => {
              if (seen.some((each) => each !== status)) done();
            };
            held++;
            const timer = setTimeout(done, ms);
            signal.addEventListener("abort", done);
            notify = check;
            ends.add(done);
            if (released) done();
            else check();
          });
        },
        close() {
          if (closed) return;
          closed = true;
          waiting--;
          subscription.unsubscribe();
        },
      };
    },
  };
}
