import pino, { type Logger } from "pino";
import { sleep } from "../shared/sleep.ts";

export type { Logger };

/**
 * JSON logs. Redaction is a second line of defence: code never passes headers, tokens or
 * secrets to the logger in the first place (docs/security.md).
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: "origin" },
      redact: {
        paths: [
          "authorization",
          "*.authorization",
          "headers",
          "*.headers",
          "token",
          "*.token",
          "secret",
          "*.secret",
          "password",
          "*.password",
          "*.secrets",
          "secrets",
          '["x-admin-api-token"]',
          '*["x-admin-api-token"]',
          '["x-registration-admin-token"]',
          '*["x-registration-admin-token"]',
          '["x-console-session"]',
          '*["x-console-session"]',
          '["x-svc-edge-secret"]',
          '*["x-svc-edge-secret"]',
        ],
        censor: "[redacted]",
      },
    },
    destination,
  );
}

/**
 * Waits up to `withinMs` for the lines still queued to reach the log's reader, then gives up on
 * them, so that the exit after it cannot wait on the reader. A reader that stopped reading without
 * closing (a stalled log collector, a pager left open) kept the pipe full: pino's flush at exit
 * then waited in a synchronous write for as long, and the origin, stopped, ignored every later
 * SIGTERM and SIGINT until SIGKILL (docs/operations.md#logs).
 */
export async function releaseLog(logger: Logger, withinMs: number): Promise<void> {
  // pino's destination (sonic-boom): `_len` counts what it holds unwritten, `_writing` a write
  // under way. Its flush(cb) answers at once, written or not, so it cannot tell.
  const destination = (logger as unknown as Record<symbol, unknown>)[pino.symbols.streamSym] as {
    _len?: number;
    _writing?: boolean;
    flushSync?: () => void;
  };
  const deadline = Date.now() + withinMs;
  while ((destination._writing || (destination._len ?? 0) > 0) && Date.now() < deadline) await sleep(20);
  // It flushes synchronously at exit: what it holds still is lost instead.
  if (destination._writing || (destination._len ?? 0) > 0) destination.flushSync = () => {};
}
