/**
 * One agent's event stream (docs/events.md#the-stream): first the agent's log from the client's
 * cursor up to where it joined the feed, then what the feed hands on, each event written once, in
 * order, as Server-Sent Events; a comment opens it, and one every 15 s keeps proxies on the way from
 * calling it idle.
 */
import type { SSEStreamingApi } from "hono/streaming";
import { findIdentityByTokenId } from "../auth/identity-repository.ts";
import type { Db } from "../db/client.ts";
import { type Cursor, laterCursor } from "./cursor.ts";
import { type FeedSubscription, isAfter } from "./feed.ts";
import { type LoggedEvent, readBacklog } from "./store.ts";

export const PING_INTERVAL_MS = 15_000;
/** A comment (docs/events.md#the-stream): every Server-Sent Events client skips it. */
const OPENED = ": open\n\n";
const BACKLOG_PAGE = 500;
/**
 * Events waiting for a client that reads too slowly: past this the stream closes, and the client
 * resumes from its last id, read from the log instead of held in memory.
 */
export const MAX_QUEUED_EVENTS = 10_000;
/**
 * How long a stream the server ended may take to write its last event: a client that reads nothing
 * (its process stuck, its loop body blocked) leaves that write waiting on a full socket for as long
 * as it keeps the connection, so past this (the ping interval: a client that took nothing for that
 * long is not reading) the connection is closed. The client resumes from its last id either way.
 */
export const CLOSE_GRACE_MS = 15_000;

/** Why the server ended a stream, told to the client as a last `stream.closed` event. */
export type CloseReason =
  | "too_many_streams"
  | "too_slow"
  | "shutting_down"
  | "identity_disabled"
  | "identity_revoked"
  | "token_rotated";

/**
 * The events after which a stream ends because its token stopped being accepted (the identity
 * disabled or revoked), so a stream opened before must not go on serving it. Each is an event of
 * the agent's log, so the cut falls exactly between what was committed before the change and what
 * came after, and costs nothing per event. Only the feed's (new) events count: one in the backlog
 * is history, since the stream's own request was accepted after it.
 */
const ENDS_THE_STREAM: ReadonlyMap<string, CloseReason> = new Map([
  ["identity.disabled", "identity_disabled"],
  ["identity.revoked", "identity_revoked"],
]);
/**
 * A rotation replaces every token of the agent with a new one. It ends the streams of the tokens it
 * replaced, not the new token's (opened after it, yet handed the event when the feed serves it
 * late), and the event names no token: the stream reads whether its own is still there. Read once
 * per rotation, not per event; written before the next event, so the cut is as exact.
 */
const TOKEN_REPLACED = "token.rotated";

/**
 * Where a stream opened from now starts, as a message of its own type, which a client that follows
 * event types never handles, with the id: every EventSource keeps it and sends it as
 * Last-Event-ID when it reconnects (a message without data would do by the standard, but some
 * clients drop its id).
 */
function startMessage(startId: bigint): string {
  const id = startId.toString();
  return `event: stream.opened\ndata: ${JSON.stringify({ after: id })}\nid: ${id}\n\n`;
}

/** What a stream writes for one event: `id:`, `event:` and the event as JSON in `data:`. */
export function sseMessage(event: LoggedEvent): { id: string; event: string; data: string } {
  return {
    id: event.id.toString(),
    event: event.type,
    data: JSON.stringify({
      id: event.id.toString(),
      type: event.type,
      occurred_at: event.occurredAt,
      data: event.data,
    }),
  };
}

export type EventStream = {
  /** Hands on one event from the feed (queued; written in order). */
  deliver(event: LoggedEvent): void;
  /**
   * Writes until the stream ends (the client leaves or close is called), then unsubscribes. The
   * subscription was made before the response began, with `deliver`, so nothing is missed while
   * the headers go out.
   */
  run(sse: SSEStreamingApi, subscription: FeedSubscription, connection?: StreamConnection): Promise<void>;
  close(reason: CloseReason): void;
};

/** What the stream ends when the client does not take its last writes: the request's connection. */
export type StreamConnection = {
  /** Ends the response and its connection, whatever is still waiting to be written. */
  abort(): void;
};

export type EventStreamParams = {
  db: Db;
  agentId: string;
  /** The token the stream was opened with: a rotation that replaced it ends the stream. */
  tokenId: string;
  /** After the client's last event; the subscription's bound when the client named none. */
  after: Cursor | undefined;
  /**
   * When the client named no event to start after (it starts from now): the id that resuming after
   * serves what this stream serves (store.ts lastEventIdThrough), told to the client with the
   * stream's first bytes, for a connection that drops before its first event.
   */
  startId?: bigint;
  pingIntervalMs?: number;
  /** CLOSE_GRACE_MS unless a test shortens it. */
  closeGraceMs?: number;
};

export function createEventStream(params: EventStreamParams): EventStream {
  const queue: LoggedEvent[] = [];
  let closed: CloseReason | "client_left" | undefined;
  let wakeWriter: (() => void) | undefined;
  /** Set while `run` writes: what a close that the client does not take in time aborts. */
  let connection: StreamConnection | undefined;
  let grace: NodeJS.Timeout | undefined;
  let graceOver = false;
  const signal = (): void => {
    wakeWriter?.();
    wakeWriter = undefined;
  };
  const close = (reason: CloseReason | "client_left"): void => {
    if (closed) return;
    closed = reason;
    // Nothing queued is written after a close: a stalled client must not keep it in memory.
    queue.length = 0;
    signal();
    // The writer may be waiting on a client that reads nothing: its last event (or the write it is
    // in) may never go out, and the stream would hold its connection, subscription and place in
    // the token's count for as long as the client keeps the socket. Past the grace it is cut.
    if (reason !== "client_left") {
      grace = setTimeout(() => {
        graceOver = true;
        connection?.abort();
      }, params.closeGraceMs ?? CLOSE_GRACE_MS);
      grace.unref();
    }
  };

  return {
    deliver(event) {
      if (closed) return;
      queue.push(event);
      if (queue.length > MAX_QUEUED_EVENTS) close("too_slow");
      else signal();
    },
    close,
    async run(sse, subscription, streamConnection) {
      connection = {
        abort() {
          // The write waiting on the client fails, so run ends; then the socket goes.
          sse.abort();
          streamConnection?.abort();
        },
      };
      if (graceOver) connection.abort();
      sse.onAbort(() => close("client_left"));
      const ping = setInterval(() => {
        if (!closed) void sse.write(": ping\n\n");
      }, params.pingIntervalMs ?? PING_INTERVAL_MS);
      try {
        // The stream's first bytes, before any read of the log: a proxy that hands a response on
        // only with its body's first chunk (the edge's runtime does) would otherwise keep a client
        // with no event yet from seeing the stream open until the first ping.
        // With a stream that starts from now, its start goes in the same first bytes: without a
        // place to resume from, a connection that dropped before the first event could only be
        // opened "from now" again, and what was written in between would never reach the client.
        await sse.write(params.startId === undefined ? OPENED : OPENED + startMessage(params.startId));
        const { bound } = subscription;
        let cursor = params.after ?? bound;
        // The log up to the bound: the feed hands on only what comes after it.
        while (!closed) {
          const page = await readBacklog(params.db, {
            agentId: params.agentId,
            after: cursor,
            through: bound,
            limit: BACKLOG_PAGE,
          });
          for (const event of page) {
            if (closed) break;
            await sse.writeSSE(sseMessage(event));
            cursor = event;
          }
          if (page.length < BACKLOG_PAGE) break;
        }
        cursor = laterCursor(cursor, bound);
        while (!closed) {
          const event = queue.shift();
          if (!event) {
            await new Promise<void>((resolve) => {
              wakeWriter = resolve;
            });
            continue;
          }
          // A client ahead of this origin's feed (it resumed with an id another origin served)
          // gets nothing twice.
          if (!isAfter(event, cursor)) continue;
          await sse.writeSSE(sseMessage(event));
          cursor = event;
          const ends = ENDS_THE_STREAM.get(event.type);
          if (ends) close(ends);
          else if (event.type === TOKEN_REPLACED && !(await tokenExists(params.db, params.tokenId))) {
            close("token_rotated");
          }
        }
        if (closed !== "client_left") {
          // No id: the client's last id stays the last event's. `retry` slows an EventSource's
          // automatic reconnection, so two clients of one token do not take turns closing each other.
          await sse.writeSSE({
            event: "stream.closed",
            data: JSON.stringify({ reason: closed }),
            retry: closed === "too_many_streams" ? 30_000 : 1_000,
          });
        }
      } finally {
        clearInterval(ping);
        clearTimeout(grace);
        connection = undefined;
        subscription.unsubscribe();
      }
    },
  };
}

/** Whether the token is still stored: a rotation deletes the tokens it replaces. */
async function tokenExists(db: Db, tokenId: string): Promise<boolean> {
  return (await findIdentityByTokenId(db, tokenId)) !== undefined;
}
