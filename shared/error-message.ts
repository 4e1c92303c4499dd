/**
 * The message of a caught value, for logs and one-line refusals. Runtime-neutral: no `node:` imports.
 */

/** `error.message` for an Error, otherwise the value as a string (a thrown string stays itself). */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
