/**
 * The logging surface the devnet needs. A pino logger fits it as is; tests pass nothing and get
 * silence. Never log private keys or raw transactions.
 */
export type DevnetLogger = {
  info(fields: Record<string, unknown>, message?: string): void;
  warn(fields: Record<string, unknown>, message?: string): void;
  error(fields: Record<string, unknown>, message?: string): void;
};

export const silentLogger: DevnetLogger = {
  info() {},
  warn() {},
  error() {},
};

/**
 * One JSON line per event on stderr, for the CLI (stdout carries only the URL line). Node writes to
 * a pipe without blocking, queueing what a stalled reader does not take: the chain goes on, and
 * the devnet logs too seldom for the queue to matter (docs/operations.md#logs).
 */
export function createStderrLogger(): DevnetLogger {
  const write = (level: string, fields: Record<string, unknown>, message?: string): void => {
    const line = { level, time: new Date().toISOString(), name: "devnet", msg: message, ...fields };
    process.stderr.write(
      `${JSON.stringify(line, (_key, value: unknown) => (typeof value === "bigint" ? value.toString() : value))}\n`,
    );
  };
  return {
    info: (fields, message) => write("info", fields, message),
    warn: (fields, message) => write("warn", fields, message),
    error: (fields, message) => write("error", fields, message),
  };
}
