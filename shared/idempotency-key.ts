/**
 * The idempotency key's rule, in a module of its own so that the CLI's bundle checks a `--key`
 * without zod and the gateway's schemas (shared/gateway-schemas.ts builds its schema from these).
 */

export const IDEMPOTENCY_KEY_MAX_LENGTH = 128;
/** Printable ASCII without spaces. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]+$/;

export const IDEMPOTENCY_KEY_MESSAGES = {
  empty: "idempotency_key must not be empty",
  tooLong: `idempotency_key must be at most ${IDEMPOTENCY_KEY_MAX_LENGTH} characters`,
  pattern: "idempotency_key must be printable ASCII without spaces",
} as const;

/** What the gateway would refuse the key for, in its words; undefined when it takes it. */
export function idempotencyKeyProblem(key: string): string | undefined {
  if (key.length === 0) return IDEMPOTENCY_KEY_MESSAGES.empty;
  if (key.length > IDEMPOTENCY_KEY_MAX_LENGTH) return IDEMPOTENCY_KEY_MESSAGES.tooLong;
  if (!IDEMPOTENCY_KEY_PATTERN.test(key)) return IDEMPOTENCY_KEY_MESSAGES.pattern;
  return undefined;
}
