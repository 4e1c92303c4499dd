/**
 * The keys an authorization without a key or nonce was given before migration 0044 (each quote's
 * purchases keyed by a window of its longest `maxTimeoutSeconds`, at most a day, and up to 8 a
 * window), so that a retry of a purchase made before an upgrade still finds it. A day after the
 * upgrade none of them can pay any more, and this module can go.
 */
import { createHash } from "node:crypto";
import { canonicalJson } from "../canonical-json.ts";

const LABEL = "agent-wallet/x402-derived-key/v1\u0000";
const CHAIN = 8;
const MAX_WINDOW_SECONDS = 86_400;

type Quote = { resource: { url: string }; accepts: unknown };

/** The window: the longest timeout among the quote's entries, at least 1 s, at most a day. */
export function legacyKeyWindow(quote: Quote): number {
  const timeouts = Array.isArray(quote.accepts)
    ? quote.accepts.map((entry) => (entry as { maxTimeoutSeconds?: unknown } | null)?.maxTimeoutSeconds)
    : [];
  const longest = Math.max(
    1,
    ...timeouts.filter(
      (each): each is number => typeof each === "number" && Number.isInteger(each) && each > 0,
    ),
  );
  return Math.min(longest, MAX_WINDOW_SECONDS);
}

/** Every key of this window and the one before: those whose authorization may still pay. */
export function legacyKeys(params: { agentId: string; quote: Quote; nowSeconds: number }): string[] {
  const { agentId, quote } = params;
  const window = Math.floor(params.nowSeconds / legacyKeyWindow(quote));
  const key = (slot: string) =>
    `x402-${createHash("sha256")
      .update(
        LABEL + canonicalJson({ agent: agentId, resource: quote.resource.url, accepts: quote.accepts, slot }),
      )
      .digest("hex")}`;
  return [window - 1, window].flatMap((each) =>
    Array.from({ length: CHAIN }, (_, link) => key(`${each}.${link}`)),
  );
}
