import { LockoutAllowance } from "../../shared/lockout-allowance.ts";
import { SlidingWindowLimiter } from "../../shared/rate-limiter.ts";
import { RecentAuthentications } from "../auth/recent-authentications.ts";
import { InFlightLimiter } from "../http/in-flight.ts";

/** The gateway's two tiers (docs/api.md#rate-limits). */
export const PRE_AUTH_FAILURES = { limit: 60, windowSeconds: 60 } as const;
export const PER_AGENT_REQUESTS = { limit: 600, windowSeconds: 60 } as const;
/**
 * Ours: /rpc calls in flight at once, per agent and per node (429 past either). With each call's
 * upstream answer capped at RPC_MAX_RESPONSE_BYTES, a node holds at most 16 answers at once, and
 * 16 more sent ahead of authentication (RPC_PREFETCH_IN_FLIGHT).
 */
export const RPC_IN_FLIGHT = { perAgent: 4, perNode: 16 } as const;
/**
 * Ours: how long an /rpc answer may take to leave once it is made. A call holds its place until
 * its answer is sent, so a client that reads none of it would hold the place, and what is left of
 * the answer in this node's memory, for as long as it keeps its connection; past this the
 * connection is closed. 30 s, as long as a request may take to arrive (server.ts RECEIVE_TIMEOUTS):
 * a client taking a 2 MiB answer at 70 KB/s or more never meets it.
 */
export const RPC_ANSWER_DEADLINE_MS = 30_000;
/**
 * Ours: /rpc calls sent ahead of authentication (rpc-prefetch.ts), per token and per node. Apart
 * from the /rpc slots, which such a call still takes once it has authenticated: these bound what a
 * token that authenticated lately, and has since stopped being valid, can have sent for nothing.
 */
export const RPC_PREFETCH_IN_FLIGHT = { perToken: 4, perNode: 16 } as const;

export type GatewayLimiters = {
  failuresPerIp: SlidingWindowLimiter;
  /** Token ids that authenticated from each client lately, which the pre-auth tier lets through. */
  recentAuthentications: RecentAuthentications;
  /** The few reads past the pre-auth limit for token ids that have not worked from the client. */
  lockoutAllowance: LockoutAllowance;
  requestsPerAgent: SlidingWindowLimiter;
  rpcInFlight: InFlightLimiter;
  rpcPrefetch: InFlightLimiter;
};

export function createGatewayLimiters(now?: () => number): GatewayLimiters {
  return {
    failuresPerIp: new SlidingWindowLimiter({ ...PRE_AUTH_FAILURES, now }),
    recentAuthentications: new RecentAuthentications({ now }),
    lockoutAllowance: new LockoutAllowance({ now }),
    requestsPerAgent: new SlidingWindowLimiter({ ...PER_AGENT_REQUESTS, now }),
    rpcInFlight: new InFlightLimiter({ perKey: RPC_IN_FLIGHT.perAgent, total: RPC_IN_FLIGHT.perNode }),
    rpcPrefetch: new InFlightLimiter({
      perKey: RPC_PREFETCH_IN_FLIGHT.perToken,
      total: RPC_PREFETCH_IN_FLIGHT.perNode,
    }),
  };
}
