import type { FetchLike } from "../client/request.ts";

/**
 * How long one request of the CLI may go without its whole answer, by default. The gateway's
 * slowest answers are a money request waiting on its sender's lock (answered 503 past the
 * database's 30 s bound) and a paid x402 request waiting for its settlement's receipt (10 s by
 * default); a minute is past both, and an agent's script still ends.
 */
export const REQUEST_TIMEOUT_SECONDS = 60;

/** The longest --timeout taken: past it Node's timer overflows and fires at once. */
export const MAX_REQUEST_TIMEOUT_SECONDS = 86_400;

/**
 * A request's failure when its answer did not come whole in time. Named as fetch names the abort
 * of a timeout signal, so the client words it as a timeout (`gateway_timeout`), not a refusal.
 */
export class RequestTimedOut extends Error {
  override readonly name = "TimeoutError";
}

/**
 * `fetchFn`, each request aborted once `timeoutMs` pass without its whole answer (its headers, or
 * its body after them), failing with RequestTimedOut. A read that asks the service to hold it until
 * the action changes (`?wait=N`, --wait) gets its N seconds more: the wait is what it asked for.
 * A server that takes the connection and never answers then ends the command instead of holding
 * it for ever (node:http waits without limit).
 */
export function withRequestTimeout(fetchFn: FetchLike, timeoutMs: number): FetchLike {
  return (input, init) => {
    const allowedMs = timeoutMs + heldSeconds(input) * 1000;
    const timeout = new AbortController();
    const seconds = Number((timeoutMs / 1000).toFixed(3));
    // Not cleared once the headers come: a fetch that streams reads the body after it resolves, and
    // the body is bounded too. Unref'd, so a finished command does not wait for it.
    setTimeout(
      () =>
        timeout.abort(
          new RequestTimedOut(
            `no whole answer within ${seconds} s; --timeout SECONDS or AGENT_TIMEOUT_SECONDS allows more`,
          ),
        ),
      allowedMs,
    ).unref();
    const signal = init?.signal ? AbortSignal.any([init.signal, timeout.signal]) : timeout.signal;
    return fetchFn(input, { ...init, signal });
  };
}

/**
 * The --timeout option or AGENT_TIMEOUT_SECONDS, in milliseconds: a positive number of seconds
 * (decimals allowed), at most a day; undefined when the text is not one.
 */
export function parseTimeoutSeconds(text: string): number | undefined {
  if (!/^\d+(\.\d+)?$/.test(text.trim())) return undefined;
  const seconds = Number(text);
  return seconds > 0 && seconds <= MAX_REQUEST_TIMEOUT_SECONDS ? Math.ceil(seconds * 1000) : undefined;
}

function heldSeconds(input: string | URL | Request): number {
  const url = new URL(input instanceof Request ? input.url : input.toString());
  const wait = url.searchParams.get("wait") ?? "";
  return /^[1-9]\d*$/.test(wait) ? Number(wait) : 0;
}
