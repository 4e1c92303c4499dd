/**
 * The agent's own events as an async iterator (docs/events.md#from-the-client): GET
 * {base}/agent/v1/events read over fetch with the client's own Server-Sent Events parser, so the
 * package needs no EventSource and runs wherever fetch streams a body (Node, Workers, browsers).
 */
import {
  errorFromEnvelope,
  GatewayError,
  TooManyStreams,
  UnexpectedAnswer,
  ValidationFailed,
} from "./errors.ts";
import { bearerHeader, type FetchLike, joinUrl } from "./request.ts";
import { createSseParser, type SseItem } from "./sse.ts";
import type { ActionEvent, AgentEvent } from "./wire.ts";

export type EventsParams = {
  /**
   * Start right after this event id (the last one the agent handled): nothing before it, nothing
   * lost after it. `0` replays every event the service still keeps; absent, the stream starts now.
   */
  after?: string | bigint;
  /** Aborting it closes the stream; the loop then ends without an error. */
  signal?: AbortSignal;
  /**
   * How long the stream may stay silent (no answer yet, no event, no `: ping`) before the
   * connection counts as dropped and is opened again. The service pings every 15 s; default 45 s.
   */
  idleTimeoutMs?: number;
};

/**
 * Whether the event's data is one of the agent's actions: `action.*`, and
 * `x402.authorization.signed`, whose data is the x402 action too (docs/events.md#the-event-log).
 */
export function isActionEvent(event: AgentEvent): event is ActionEvent {
  return event.type.startsWith("action.") || event.type === "x402.authorization.signed";
}

/** What the stream needs of the client: read at each connection, so a rotated token is used. */
export type EventsDeps = { fetch: FetchLike; baseUrl: string; token: string };

const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 30_000;
const IDLE_TIMEOUT_MS = 45_000;
/**
 * Ids of the events already yielded, kept to skip a repeat. The service's resume never repeats one
 * (its cursor is the id the client sends); this only guards the seam of a reconnection, which is
 * recent, so a bounded set is enough.
 */
const REMEMBERED_IDS = 10_000;
const EVENT_ID = /^\d{1,19}$/;

/**
 * The agent's events, in the service's order, each once. A dropped connection (a network error, the
 * body ending, a 5xx, silence past `idleTimeoutMs`, before the answer's headers too, the service ending the stream as `too_slow` or
 * `shutting_down`) is opened again with `Last-Event-ID`, the last event's id, after a backoff (0.5 s
 * doubling to 30 s, or the `retry:` the service named); a 429 waits its Retry-After. Throws
 * TooManyStreams when a newer stream of the token took this one's place, and the error of its class
 * for any other 4xx (a bad token, an `after` the service does not hold). Leaving the loop (break,
 * return, an exception in its body) closes the connection.
 */
export async function* followEvents(
  deps: EventsDeps,
  params: EventsParams = {},
): AsyncGenerator<AgentEvent, void, undefined> {
  const { signal } = params;
  let lastEventId = params.after === undefined ? undefined : String(params.after);
  if (lastEventId !== undefined && !EVENT_ID.test(lastEventId)) {
    throw new ValidationFailed("after must be an event id: a whole number", { code: "validation_failed" });
  }
  const yielded = new RecentIds(REMEMBERED_IDS);
  let failures = 0;

  while (!signal?.aborted) {
    const connection = new AbortController();
    const abort = (): void => connection.abort();
    signal?.addEventListener("abort", abort);
    /** When set, the stream ended as the service meant it to: reconnect after this long. */
    let closedRetryMs: number | undefined;
    let retryAfterMs = 0;
    const idleMs = params.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
    try {
      // A server that takes the connection and sends no answer is as silent as a stream that
      // stopped: the same timeout gives it up (fetch's own waits minutes for the headers).
      const unanswered = setTimeout(() => connection.abort(), idleMs);
      const response = await open(deps, lastEventId, connection.signal).finally(() =>
        clearTimeout(unanswered),
      );
      if (response === undefined) {
        // No answer: the network, or the abort.
      } else if (!response.ok) {
        const error = await errorOf(response);
        if (!passing(response.status)) throw error;
        // A 429's wait, or a 503's Retry-After: opening again sooner meets the same answer.
        retryAfterMs = (error.retryAfter ?? 0) * 1000;
      } else {
        const body = streamOf(response);
        let serverRetryMs: number | undefined;
        try {
          // Anything arriving (a ping too) shows the link works: the next drop starts the backoff over.
          const alive = (): void => {
            failures = 0;
          };
          for await (const item of sseItems(body, connection, idleMs, alive)) {
            if (item.kind === "retry") {
              serverRetryMs = item.ms;
              continue;
            }
            if (item.event === "stream.opened") {
              // Where a stream opened from now starts: a reconnection before the first event
              // resumes there, not from a later "now" that would skip what came in between.
              if (EVENT_ID.test(item.lastEventId)) lastEventId = item.lastEventId;
              continue;
            }
            if (item.event === "stream.closed") {
              const reason = closedReason(item.data);
              if (reason === "too_many_streams") {
                throw new TooManyStreams(
                  "the event stream was closed: a newer stream of this token took its place",
                  { code: "too_many_streams", body: { reason } },
                );
              }
              // At most the backoff's own ceiling: a `retry:` past 2^31 ms would overflow the timer
              // and fire at once, a reconnection loop against a server that asked for a pause.
              closedRetryMs = Math.min(serverRetryMs ?? FIRST_RETRY_MS, MAX_RETRY_MS);
              break;
            }
            const event = parseEvent(item.data);
            if (!event) continue; // a message the stream does not document (no event of ours)
            // The id a reconnection resumes after (never empty: the service names each event's).
            if (item.lastEventId !== "") lastEventId = item.lastEventId;
            if (yielded.has(event.id)) continue;
            yielded.add(event.id);
            yield event;
          }
        } catch (error) {
          if (error instanceof GatewayError) throw error;
          // The body failed: the connection dropped, idled past the timeout, or sent a message too
          // long to be the service's (sse.ts MAX_MESSAGE_CHARS). Reconnect below.
        }
      }
    } finally {
      signal?.removeEventListener("abort", abort);
      connection.abort();
    }
    if (signal?.aborted) return;
    const delay =
      closedRetryMs ?? Math.max(retryAfterMs, Math.min(FIRST_RETRY_MS * 2 ** failures++, MAX_RETRY_MS));
    // Jitter, so the streams an origin's restart dropped do not all come back at the same instant;
    // only later than a 429's Retry-After, since coming back before it meets another 429.
    const jitter = retryAfterMs > 0 ? 1 + Math.random() * 0.2 : 0.8 + Math.random() * 0.4;
    await pause(delay * jitter, signal);
  }
}

/** The stream's response, or undefined when there was no answer (the network failed, or abort). */
async function open(
  deps: EventsDeps,
  lastEventId: string | undefined,
  signal: AbortSignal,
): Promise<Response | undefined> {
  // Outside the try below: a token no header can carry throws, where no answer is reconnected.
  const headers: Record<string, string> = {
    accept: "text/event-stream",
    authorization: bearerHeader(deps.token),
    ...(lastEventId === undefined ? {} : { "last-event-id": lastEventId }),
  };
  try {
    return await deps.fetch(joinUrl(deps.baseUrl, "/agent/v1/events"), { method: "GET", headers, signal });
  } catch {
    return undefined;
  }
}

/**
 * An answer that says "not now" (a 5xx, 408, 429), after which the stream is opened again; any
 * other error is the answer for good.
 */
function passing(status: number): boolean {
  return status >= 500 || status === 408 || status === 429;
}

async function errorOf(response: Response): Promise<GatewayError> {
  let body: unknown;
  try {
    body = JSON.parse(await response.text());
  } catch {
    body = undefined;
  }
  return errorFromEnvelope(response.status, body, response.headers.get("retry-after"));
}

function streamOf(response: Response): ReadableStream<Uint8Array> {
  const type = response.headers.get("content-type") ?? "";
  if (!type.toLowerCase().startsWith("text/event-stream")) {
    throw new UnexpectedAnswer(
      `the event stream answered ${response.status} with ${type || "no content type"}: not the gateway's answer; is the base URL the gateway's (chain segment included)?`,
      {
        code: "unexpected_answer",
        status: response.status,
      },
    );
  }
  if (!response.body) {
    // A FetchLike that buffers whole bodies (the CLI's node:http one) cannot follow a stream.
    throw new TypeError("events() needs a fetch whose responses stream their body");
  }
  return response.body;
}

/**
 * The body's Server-Sent Events items. Aborts `connection` when nothing arrives for `idleMs`, which
 * fails the read; calls `alive` whenever something does; leaving the loop cancels the body.
 */
async function* sseItems(
  body: ReadableStream<Uint8Array>,
  connection: AbortController,
  idleMs: number,
  alive: () => void,
): AsyncGenerator<SseItem, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const parser = createSseParser();
  let idle: ReturnType<typeof setTimeout> | undefined;
  const armIdle = (): void => {
    clearTimeout(idle);
    idle = setTimeout(() => {
      connection.abort();
      void reader.cancel().catch(() => {});
    }, idleMs);
  };
  try {
    armIdle();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      armIdle();
      alive();
      yield* parser.push(decoder.decode(value, { stream: true }));
    }
  } finally {
    clearTimeout(idle);
    void reader.cancel().catch(() => {});
  }
}

function closedReason(data: string): string | undefined {
  try {
    const reason = (JSON.parse(data) as { reason?: unknown }).reason;
    return typeof reason === "string" ? reason : undefined;
  } catch {
    return undefined;
  }
}

/** The event a `data:` line carries; undefined for anything else. */
function parseEvent(data: string): AgentEvent | undefined {
  let event: unknown;
  try {
    event = JSON.parse(data);
  } catch {
    return undefined;
  }
  const fields = event as Partial<AgentEvent> | null;
  if (
    typeof fields?.id !== "string" ||
    typeof fields.type !== "string" ||
    typeof fields.occurred_at !== "string" ||
    typeof fields.data !== "object" ||
    fields.data === null
  ) {
    return undefined;
  }
  return fields as AgentEvent;
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done);
  });
}

/** A set of the last `size` ids added (insertion order: the oldest goes first). */
class RecentIds {
  private readonly ids = new Set<string>();
  constructor(private readonly size: number) {}
  has(id: string): boolean {
    return this.ids.has(id);
  }
  add(id: string): void {
    this.ids.add(id);
    if (this.ids.size > this.size) this.ids.delete(this.ids.values().next().value as string);
  }
}
