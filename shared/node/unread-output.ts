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
