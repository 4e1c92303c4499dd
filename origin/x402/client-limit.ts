/**
 * The x402 surfaces' per-client window: the facilitator's verify and settle and the demo's paid
 * retry each read the chain and the database, and a settle may sign, for anyone on the network
 * without a token. One sliding window (http/rate-limiter.ts, in memory per node, as SPEC Limits
 * keeps the gateway's) counts them together per client: an IPv4 address, or an IPv6 /64
 * (http/client-ip.ts addressGroup), as the client IP middleware resolved it. The route answers a
 * refusal with 429 and Retry-After in its own x402 shape, not in the gateway's envelope.
 */
import { addressGroup } from "../http/client-ip.ts";
import { SlidingWindowLimiter } from "../http/rate-limiter.ts";
import { ignoreRefusal, type RefusalCounter } from "../http/refusals.ts";

/** Counts one request of `clientIp`: undefined when it fits, else the seconds until one would. */
export type ClientLimit = (clientIp: string) => number | undefined;

export const CLIENT_WINDOW_SECONDS = 60;

export function createClientLimit(params: {
  /** AGENT_X402_RATE_LIMIT_PER_MINUTE. */
  perMinute: number;
  refusals?: RefusalCounter;
  now?: () => number;
}): ClientLimit {
  const limiter = new SlidingWindowLimiter({
    limit: params.perMinute,
    windowSeconds: CLIENT_WINDOW_SECONDS,
    now: params.now,
  });
  const refused = params.refusals ?? ignoreRefusal;
  return (clientIp) => {
    const decision = limiter.consume(addressGroup(clientIp));
    if (decision.allowed) return undefined;
    refused("x402_client");
    return decision.retryAfterSeconds;
  };
}
