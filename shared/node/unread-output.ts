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
 * The most of its log lines, unwritten, a program holds for a reader that does not keep up (some
 * 4,000 of the origin's request lines): past it each line is dropped, so a stalled reader costs
 * the lines and never the program's memory (docs/operations.md#logs).
 */
export const LOG_QUEUE_MAX_BYTES = 1024 * 1024;

/**
 * pino's destination on `fd` (1 stdout, 2 stderr), writing as pino's own does (asynchronously),
 * holding at most LOG_QUEUE_MAX_BYTES for a reader that does not keep up, where pino's own held
 * every line for as long as the reader stalled. Once it has caught up it says how many lines it
 * dropped, in a line of its own tagged with `service`.
 */
export function boundedLogDestination(fd: 1 | 2, service: string): ReturnType<typeof pino.destination> {
  // Node's own stream on the fd, made here if not yet, opens a pipe or a socket non-blocking, as
  // pino's default destination did by looking at process.stdout: a write to a full pipe then
  // meets EAGAIN and is tried again later, where a blocking one held a thread of libuv's pool
  // until the reader came back, and the exit waited on that thread past every SIGTERM.
  void (fd === 1 ? process.stdout : process.stderr);
  const destination = pino.destination({ dest: fd, sync: false, maxLength: LOG_QUEUE_MAX_BYTES });
  let dropped = 0;
  destination.on("drop", () => {
    dropped++;
  });
  // `drain`: everything it held is written, so the reader reads again.
  destination.on("drain", () => {
    if (dropped === 0) return;
    const line = { level: 40, time: Date.now(), service, dropped_lines: dropped, msg: "log lines dropped" };
    dropped = 0;
    destination.write(`${JSON.stringify(line)}\n`);
  });
  return destination;
}

/**
 * Writes each line to `stream` (a launcher passing on its parts' output) unless LOG_QUEUE_MAX_BYTES
 * already wait there: Node writes to a pipe without blocking and queues what a stalled reader does
 * not take, so a launcher passing on the origin's line a request held them all in its memory. The
 * lines past the bound are dropped and counted, and the next line with room is preceded by
 * `dropped(count)`.
 */
export function boundedLineWriter(
  stream: NodeJS.WritableStream & { writableLength: number },
  dropped: (count: number) => string,
): (line: string) => void {
  let count = 0;
  return (line) => {
    if (stream.writableLength > LOG_QUEUE_MAX_BYTES) {
      count++;
      return;
    }
    if (count > 0) stream.write(`${dropped(count)}\n`);
    count = 0;
    stream.write(`${line}\n`);
  };
}

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
