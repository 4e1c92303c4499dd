/**
 * GET {base}/agent/v1/events (capability `read`): the caller's own events as Server-Sent Events
 * (docs/events.md#the-stream). Resumes after `Last-Event-ID` or `?after=ID`; `after=0` replays
 * every event still kept; neither starts from now.
 */
import type { ServerResponse } from "node:http";
import type { Handler } from "hono";
import { streamSSE } from "hono/streaming";
import { errorMessage } from "../../shared/error-message.ts";
import { parseEventId } from "../../shared/event-types.ts";
import { findIdentityByTokenId, type TokenIdentity } from "../auth/identity-repository.ts";
import type { Db } from "../db/client.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import type { Logger } from "../logger.ts";
import { CURSOR_START, type Cursor } from "./cursor.ts";
import type { EventFeed } from "./feed.ts";
import { currentHorizon, findCursor, lastEventIdThrough } from "./store.ts";
import { createEventStream, type EventStream } from "./stream.ts";
import type { StreamCap } from "./stream-cap.ts";

export type EventsRouteDeps = {
  db: Db;
  feed: EventFeed;
  cap: StreamCap;
  /** Every open stream of this origin, closed at shutdown. */
  open: Set<EventStream>;
  logger: Logger;
  pingIntervalMs?: number;
  /** How long a stream the server ended may take to write its last event (stream.ts CLOSE_GRACE_MS). */
  closeGraceMs?: number;
};

export function eventsStreamHandler(deps: EventsRouteDeps): Handler<AppEnv> {
  return async (c) => {
    const agentId = c.get("agent").agentId;
    // The header is what an EventSource sends when it reconnects, so it is newer than the query
    // the stream was first opened with.
    const named = c.req.header("last-event-id") ?? c.req.query("after");
    // Neither: from now, the log's horizon as this request reads it. The feed's own cursor may lag
    // it by up to a read, and would hand on events committed before the request came.
    const after =
      named === undefined ? await currentHorizon(deps.db) : await resolveCursor(deps.db, agentId, named);
    // Read before the answer, so the client has it with the stream's first bytes.
    const startId = named === undefined ? await lastEventIdThrough(deps.db, agentId, after) : undefined;

    const tokenId = c.get("tokenId");
    const stream = createEventStream({
      db: deps.db,
      agentId,
      tokenId,
      after,
      startId,
      pingIntervalMs: deps.pingIntervalMs,
      closeGraceMs: deps.closeGraceMs,
    });
    const subscription = await deps.feed.subscribe(agentId, stream.deliver);
    try {
      await ensureStillAccepted(deps.db, tokenId);
    } catch (error) {
      subscription.unsubscribe();
      throw error;
    }
    deps.open.add(stream);
    const release = deps.cap.open(tokenId, () => stream.close("too_many_streams"));
    // Proxies must pass each event on as it comes (nginx buffers otherwise).
    c.header("X-Accel-Buffering", "no");
    // The node server's response (@hono/node-server hands it in the env): what is closed when a
    // client that reads nothing does not take the stream's end (stream.ts CLOSE_GRACE_MS).
    const response = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
    return streamSSE(c, async (sse) => {
      try {
        await stream.run(sse, subscription, { abort: () => response?.destroy() });
      } catch (error) {
        // The log could not be read (the database went away): the stream ends, and the client
        // resumes from its last id when it reconnects.
        deps.logger.warn({ err: { message: errorMessage(error) } }, "event stream ended on a failed read");
      } finally {
        release();
        deps.open.delete(stream);
      }
    });
  };
}

/**
 * The token was read before the subscription's bound was. A disable, revocation or rotation that
 * committed in between lies at or before that bound: the stream would read its event as history,
 * and the feed, which serves only what comes after the bound, would not end the stream with it.
 * So the token is read once more, now that the bound is set, and refused as authentication would
 * refuse it: whatever commits after this read comes after the bound and ends the stream.
 */
async function ensureStillAccepted(db: Db, tokenId: string): Promise<void> {
  let identity: TokenIdentity | undefined;
  try {
    identity = await findIdentityByTokenId(db, tokenId);
  } catch (error) {
    throw new AppError("service_unavailable", "authentication is temporarily unavailable", { cause: error });
  }
  if (!identity || identity.revoked || !identity.enabled) {
    throw new AppError("agent_auth_failed", "authentication failed");
  }
}

/**
 * The client's last event as a cursor: `0` is before every event; an id the log does not hold for
 * this agent (never written, swept after AGENT_EVENTS_RETENTION_DAYS, or another agent's: one
 * answer) is refused, so a client learns it cannot resume rather than silently missing events.
 */
async function resolveCursor(db: Db, agentId: string, named: string): Promise<Cursor> {
  const id = parseEventId(named.trim());
  if (id === undefined) {
    throw new AppError(
      "validation_failed",
      "the last event id (Last-Event-ID or after) must be a whole number",
    );
  }
  if (id === 0n) return CURSOR_START;
  const found = await findCursor(db, agentId, id);
  if (!found) {
    throw new AppError(
      "validation_failed",
      "no event of yours has this id (unknown, or older than the events kept): open the stream with after=0 to read every event kept, or with neither to start from now",
    );
  }
  return found;
}
