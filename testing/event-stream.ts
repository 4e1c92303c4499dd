/**
 * An agent's event stream as a real EventSource client follows it (the `eventsource` package, the
 * WHATWG EventSource in Node), for the stream's tests: every event it receives, in order, with the
 * id it carried, and the `stream.closed` notice if the server ended the stream.
 */
import { EventSource } from "eventsource";
import { EVENT_TYPES } from "../shared/event-types.ts";
import { sleep } from "../shared/sleep.ts";

export type ReceivedEvent = {
  id: string;
  type: string;
  body: { id: string; type: string; occurred_at: string; data: Record<string, unknown> };
};

export type FollowedStream = {
  events: ReceivedEvent[];
  /** The reason of the server's `stream.closed` notice, once one came. */
  closedReason(): string | undefined;
  /** How many times the connection failed or was cut (the client reconnects by itself). */
  errors(): number;
  /**
   * Resolves once the service answered the stream (its headers came), or throws after `timeoutMs`:
   * from then on the stream is subscribed, its start fixed.
   */
  waitForOpen(timeoutMs?: number): Promise<void>;
  /** Resolves once `count` events came, or throws after `timeoutMs`. */
  waitForCount(count: number, timeoutMs?: number): Promise<ReceivedEvent[]>;
  /** The events of one action. */
  ofAction(actionId: string): ReceivedEvent[];
  close(): void;
};

export type FollowParams = {
  /** `{base}/agent/v1/events`, with `?after=` when wanted. */
  url: string;
  token: string;
  /** Sent as Last-Event-ID on the first connection (a resume). */
  lastEventId?: string;
};

/**
 * Every type the log writes, the node's own too: a stream never carries those, and a test can
 * see that only if this client would record one.
 */
const TYPES = EVENT_TYPES;

export function followEvents(params: FollowParams): FollowedStream {
  const events: ReceivedEvent[] = [];
  let closedReason: string | undefined;
  let errors = 0;
  let opened = false;
  const source = new EventSource(params.url, {
    fetch: (input, init) =>
      fetch(input, {
        ...init,
        headers: {
          ...(init?.headers as Record<string, string>),
          authorization: `Bearer ${params.token}`,
          ...(params.lastEventId !== undefined &&
          !(init?.headers as Record<string, string>)?.["Last-Event-ID"]
            ? { "last-event-id": params.lastEventId }
            : {}),
        },
      }),
  });
  for (const type of TYPES) {
    source.addEventListener(type, (message) => {
      events.push({ id: message.lastEventId, type, body: JSON.parse(message.data) });
    });
  }
  source.addEventListener("stream.closed", (message) => {
    closedReason = (JSON.parse(message.data) as { reason: string }).reason;
    source.close();
  });
  source.onerror = () => {
    errors++;
  };
  source.onopen = () => {
    opened = true;
  };
  return {
    events,
    closedReason: () => closedReason,
    errors: () => errors,
    async waitForOpen(timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (!opened) {
        if (Date.now() > deadline) throw new Error(`the stream did not open in ${timeoutMs} ms`);
        await sleep(20);
      }
    },
    async waitForCount(count, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (events.length < count) {
        if (Date.now() > deadline) {
          throw new Error(
            `${events.length} events of ${count} after ${timeoutMs} ms: ${events.map((e) => e.type).join(", ")}`,
          );
        }
        await sleep(20);
      }
      return events.slice(0, count);
    },
    ofAction: (actionId) => events.filter((event) => event.body.data.action_id === actionId),
    close: () => source.close(),
  };
}
