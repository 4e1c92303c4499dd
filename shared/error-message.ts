/**
 * The message of a caught value, for logs and one-line refusals. Runtime-neutral: no `node:` imports.
 */

/**
 * `error.message` for an Error, otherwise the value as a string (a thrown string stays itself). A
 * failed query's error (drizzle's carries `query` and `params`) gives its cause's message instead:
 * its own message lists the statement's parameters, which may be a secret (a webhook endpoint's,
 * a session's) and must never reach a log.
 */
export function errorMessage(error: unknown): string {
  if (error instanceof Error && "query" in error && "params" in error) {
    return `database query failed${error.cause === undefined ? "" : `: ${errorMessage(error.cause)}`}`;
  }
  return error instanceof Error ? error.message : String(error);
}
