/**
 * Which x402 version a quote names, read from the quote as it was sent, before its shape is judged:
 * a quote of another version has another shape (version 1 names its resource in each `accepts`
 * entry, its amount `maxAmountRequired`), and is refused for its version, never taken for a
 * malformed request (docs/x402.md#an-agent-pays-with-its-token-authorize).
 */

/** The one x402 version this service authorizes and settles. */
export const PAID_X402_VERSION = 2;

/**
 * The whole-number `x402Version` a quote as sent names when it is not the one paid here; undefined
 * for that one, and for a quote naming none (its schema then says what is wrong).
 */
export function otherX402Version(quote: unknown): number | undefined {
  const version = (quote as { x402Version?: unknown } | null | undefined)?.x402Version;
  return typeof version === "number" && Number.isSafeInteger(version) && version !== PAID_X402_VERSION
    ? version
    : undefined;
}
