import pino, { type Logger } from "pino";
import { sleep } from "../sleep.ts";

/**
 * A long-running program's stdout and stderr may outlive their reader: a closed terminal, `| head`,
 * a supervisor's log collector that restarts (docs/operations.md#logs). A write to a pipe nobody
 * reads fails (EPIPE, or EIO on a closed terminal) as an `error` event, and one nobody listens for
 * ends the process at once, in the middle of whatever it was doing: the devnet died so at the
 * "stopping" line of a SIGTERM, before it saved its chain.
 */

/**
 * Makes a failed write to stdout or stderr lose that line only, never the process: call it first
 * thing in a program that runs until it is stopped. Not for a program whose stdout is its answer
 * and that should stop when nobody reads it (the CLI's `watch`, cli/main.ts).
 */
export function ignoreUnreadOutput(): void {
  for (const stream of [process.stdout, process.stderr]) stream.on("error", () => {});
}

/**
 * Waits up to `withinMs` (a second unless given) for the lines still queued to reach the log's reader, then gives up on
 * them, so that the exit after it cannot wait on the reader. A reader that stopped reading without
 * closing (a stalled log collector, a pager left open) kept the pipe full: pino's flush at exit
 * then retried its synchronous write for as long, and the origin or the enclave, stopped, ignored
 * every later SIGTERM and SIGINT until SIGKILL (docs/operations.md#logs).
 */
export async function releaseLog(logger: Logger, withinMs = 1_000): Promise<void> {
  // pino's destination (sonic-boom): `_len` counts what it holds unwritten, `_writing` a write
  // under way. Its flush(cb) answers at once, written or not, so it cannot tell.
  const destination = (logger as unknown as Record<symbol, unknown>)[pino.symbols.streamSym] as {
    _len?: number;
    _writing?: boolean;
    flushSync?: () => void;
  };
  // Only a write under way can still reach a reader: after a failed one (EPIPE, the reader gone)
  // sonic-boom keeps what it held, unwritten for good, and waiting on it would only delay the exit.
  const deadline = Date.now() + withinMs;
  while (destination._writing && Date.now() < deadline) await sleep(20);
  // It flushes synchronously at exit: what it holds still is lost instead.
  if (destination._writing || (destination._len ?? 0) > 0) destination.flushSync = () => {};
}
