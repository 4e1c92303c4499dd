import { SlidingWindowLimiter } from "../http/rate-limiter.ts";

/** SPEC Limits: the two gateway tiers. */
export const PRE_AUTH_FAILURES = { limit: 60, windowSeconds: 60 } as const;
export const PER_AGENT_REQUESTS = { limit: 600, windowSeconds: 60 } as const;

export type GatewayLimiters = {
  failuresPerIp: SlidingWindowLimiter;
  requestsPerAgent: SlidingWindowLimiter;
};

export function createGatewayLimiters(now?: () => number): GatewayLimiters {
  return {
    failuresPerIp: new SlidingWindowLimiter({ ...PRE_AUTH_FAILURES, now }),
    requestsPerAgent: new SlidingWindowLimiter({ ...PER_AGENT_REQUESTS, now }),
  };
}
