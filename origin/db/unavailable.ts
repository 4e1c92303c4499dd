/**
 * Whether an error means the database could not be reached or went away mid-query (a restart, a
 * failover, a cut connection), as opposed to a bug or a refused statement. Such a request is
 * answered 503 (a retry is safe: money requests are idempotent by key), never 500.
 */

/** Socket errors of the driver's connection. */
const SOCKET_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENOTFOUND",
]);

/**
 * SQLSTATEs of an unavailable server: class 08 (connection exception), 57P01-57P03 (admin or
 * crash shutdown, cannot connect now), 53300 (too many connections).
 */
const UNAVAILABLE_SQLSTATE = /^(08...|57P0[123]|53300)$/;

/**
 * What node-postgres and the Neon driver say when a connection ends under a query, or a statement
 * went unanswered past its bound (db/client.ts STATEMENT_WAIT_MS).
 */
const LOST_CONNECTION =
  /connection terminated|connection error|not queryable|timeout exceeded when trying to connect|server closed the connection|query read timeout/i;

export function isDatabaseUnavailable(error: unknown): boolean {
  // drizzle wraps the driver's error (DrizzleQueryError): follow the causes, a few levels deep.
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && (SOCKET_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code))) return true;
    if (LOST_CONNECTION.test(current.message)) return true;
    current = current.cause;
  }
  return false;
}
