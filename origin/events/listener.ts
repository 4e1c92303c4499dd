/**
 * The origin's one `LISTEN events` session, on a direct connection of its own (not from the pool,
 * which would hand the session back). Each notification carries only the highest event id a
 * transaction wrote; the listener just says "read now". After a drop it reconnects with backoff and
 * says "read now" again, so the feed re-reads from its cursor whatever was written meanwhile
 * (docs/events.md#fan-out).
 */
import { errorMessage } from "../../shared/error-message.ts";
import type { DirectConnection } from "../db/client.ts";
import type { Logger } from "../logger.ts";

export const EVENTS_CHANNEL = "events";

export type EventListenerParams = {
  connect: () => DirectConnection;
  /** Called on each notification, and after each (re)connection. */
  onWake: () => void;
  logger: Logger;
  /** Backoff bounds of reconnection, in ms. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
};

export type EventListener = {
  /** Whether the session is listening now (the poll covers the gaps either way). */
  listening(): boolean;
  stop(): Promise<void>;
};

export function startEventListener(params: EventListenerParams): EventListener {
  const minBackoff = params.minBackoffMs ?? 250;
  const maxBackoff = params.maxBackoffMs ?? 30_000;
  let stopped = false;
  let current: DirectConnection | undefined;
  let live = false;
  let failures = 0;
  let retry: NodeJS.Timeout | undefined;

  const scheduleReconnect = (): void => {
    if (stopped || retry) return;
    const delay = Math.min(maxBackoff, minBackoff * 2 ** Math.min(failures, 16));
    failures++;
    retry = setTimeout(() => {
      retry = undefined;
      void connect();
    }, delay);
  };

  const connect = async (): Promise<void> => {
    const connection = params.connect();
    current = connection;
    let dropped = false;
    const drop = (reason: string): void => {
      if (dropped || current !== connection) return;
      dropped = true;
      live = false;
      if (!stopped) params.logger.warn({ reason }, "events listener dropped; polling until it is back");
      connection.end().catch(() => {});
      scheduleReconnect();
    };
    connection.on("error", (error) => drop(errorMessage(error)));
    connection.on("end", () => drop("connection ended"));
    connection.on("notification", (message) => {
      if (message.channel === EVENTS_CHANNEL) params.onWake();
    });
    try {
      await connection.connect();
      await connection.query(`LISTEN ${EVENTS_CHANNEL}`);
      if (stopped || dropped) return;
      live = true;
      failures = 0;
      // Whatever was written while nobody listened is read from the feed's cursor now.
      params.onWake();
    } catch (error) {
      drop(errorMessage(error));
    }
  };

  void connect();
  return {
    listening: () => live,
    async stop() {
      stopped = true;
      clearTimeout(retry);
      live = false;
      await current?.end().catch(() => {});
    },
  };
}
