import type { MiddlewareHandler } from "hono";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import {
  type Capability,
  HEADER_ADDRESS_LOCKED,
  HEADER_ADDRESS_TOKENS,
  HEADER_AUTHENTICATED,
  HEADER_LOCKOUT_LANE,
} from "../../shared/constants.ts";
import type { LockoutAllowance } from "../../shared/lockout-allowance.ts";
import type { LimitDecision, SlidingWindowLimiter } from "../../shared/rate-limiter.ts";
import { AppError } from "../errors.ts";
import { addressGroup } from "../http/client-ip.ts";
import type { AppEnv } from "../http/env.ts";
import { ignoreRefusal, type RefusalCounter } from "../http/refusals.ts";
import type { TokenIdentity, TokenLookup } from "./identity-repository.ts";
import { ReadsInFlight } from "./reads-in-flight.ts";
import type { RecentAuthentications } from "./recent-authentications.ts";
import { secretMatches } from "./token.ts";

/** Why authentication failed: kept internal, collapsed into one wire error (no oracle). */
type AuthFailure = "missing_or_malformed" | "unknown_token" | "wrong_secret" | "revoked" | "disabled";

export type BearerAuthParams = {
  /** Reads the identity behind a token id from the database, per request (createTokenLookup). */
  lookup: TokenLookup;
  /** Pre-auth tier: failed authentications per client IP (IPv6 per /64, see addressGroup). */
  failuresPerIp: SlidingWindowLimiter;
  /** The token ids that authenticated from each client lately: still looked up past the limit. */
  recentAuthentications: RecentAuthentications;
  /** The few reads past the limit for other token ids (lockout-allowance.ts). */
  lockoutAllowance: LockoutAllowance;
  /** Post-auth tier: requests per agent. */
  requestsPerAgent: SlidingWindowLimiter;
  onFailure?: (reason: AuthFailure, clientIp: string) => void;
  /** Told of each 429 of either tier (metrics). */
  refusals?: RefusalCounter;
};

// A fixed hash to compare against when the token id is unknown, so both paths do the same work.
const DUMMY_HASH = Buffer.alloc(32);
// What a missing or malformed presentation is looked up and compared as: an id no token has
// (not 32 hex digits) and a secret, so every failure costs one store read and one hash compare
// and the timing does not tell a malformed token from a well-formed one (docs/security.md).
const NO_SUCH_TOKEN = { tokenId: "-", secret: "00".repeat(32) } as const;
/**
 * The most token ids a locked-out address's 429 names for the edge. An address that more tokens
 * worked from (a large NAT) is not named locked at all: the edge passes it all on, as before.
 */
export const EDGE_LOCK_TOKENS_AT_MOST = 32;

/**
 * Fail-closed authentication against a non-revoked, enabled identity (docs/api.md#conventions),
 * read from the database on every request. Every failure is the same 401 `agent_auth_failed`
 * (429 once the client's failure budget is spent), whatever its cause.
 *
 * Past a client's failure budget (only failures count: docs/api.md#rate-limits), a request is
 * refused 429 before any database read, unless its token id authenticated from that client lately
 * (RecentAuthentications), or the address's small allowance for other ids admits it
 * (LockoutAllowance): those are authenticated as usual, so a neighbour's bad tokens cannot lock out
 * the agents that share its address, nor keep a fresh one out. A failure past the budget is 429
 * however it was read, counts like any other, and the id no longer counts as working there.
 *
 * Through the edge (a valid edge secret), the answers tell the edge what it needs to refuse such
 * requests itself (edge-worker/lockouts.ts): a pre-auth 429 says how long the address stays past
 * its budget and which ids worked from it lately; the answer to a request the edge let through
 * its own lockout allowance says whether the token authenticated; and an id the edge told to come
 * back enters this allowance's come-back lane too.
 */
export function bearerAuth(params: BearerAuthParams): MiddlewareHandler<AppEnv> {
  const reads = new ReadsInFlight();
  return async (c, next) => {
    const clientIp = c.get("clientIp");
    const viaEdge = c.get("viaEdge") === true;
    const edgeLane = viaEdge ? c.req.header(HEADER_LOCKOUT_LANE) : undefined;
    const source = addressGroup(clientIp);
    const refused = params.refusals ?? ignoreRefusal;
    const parsed = parseBearerHeader(c.req.header("authorization"));
    const presented = parsed ?? NO_SUCH_TOKEN;
    const known = parsed !== null && params.recentAuthentications.has(source, parsed.tokenId);
    // An id that has not worked from here is read under the limit only once there is room for it.
    const { decision: blocked, readEnds } = known
      ? { decision: params.failuresPerIp.peek(source), readEnds: undefined }
      : await roomToRead(params.failuresPerIp, reads, source, presented.tokenId);
    // Past the limit, an id that has not worked from here is read only if the allowance admits it.
    const lane =
      blocked.allowed || known || parsed === null
        ? undefined
        : params.lockoutAllowance.admit(source, parsed.tokenId, edgeLane === "come_back");
    if (!blocked.allowed && !known && !lane?.admitted) {
      refused("pre_auth_ip");
      throw rateLimited(
        lane?.retryAfterSeconds ?? blocked.retryAfterSeconds,
        viaEdge ? edgeLock(params.recentAuthentications, source, blocked.retryAfterSeconds) : undefined,
      );
    }

    let failure: AuthFailure | undefined;
    let identity: TokenIdentity | undefined;
    try {
      identity = await params.lookup(presented.tokenId);
    } catch (error) {
      // Fail closed, and say it is the service, not the token: no failure is counted against the IP.
      throw new AppError("service_unavailable", "authentication is temporarily unavailable", {
        cause: error,
        // As every other 503 of an unavailable database (app.ts): the client may ask again.
        headers: { "Retry-After": "1" },
      });
    } finally {
      // Before the outcome is counted below, in the same turn: a request it wakes sees the count.
      readEnds?.();
    }
    const secretOk = secretMatches(presented.secret, identity?.secretHash ?? DUMMY_HASH);
    if (!parsed) failure = "missing_or_malformed";
    else if (!secretOk || !identity) {
      failure = identity ? "wrong_secret" : "unknown_token";
    } else if (identity.revoked) failure = "revoked";
    else if (!identity.enabled) failure = "disabled";

    if (failure || !identity) {
      params.onFailure?.(failure ?? "unknown_token", clientIp);
      // A token id that fails from here is no longer one that works from here: it cannot keep
      // buying reads past the limit with wrong secrets.
      if (known) params.recentAuthentications.forget(source, presented.tokenId);
      if (lane?.admitted) params.lockoutAllowance.failed(source, presented.tokenId);
      // Counted when the outcome is known, so the limit holds however many attempts arrive at
      // once: those that fail after the budget filled up are answered 429 like any later one.
      // Only failures count: a success never uses any of the client's budget.
      const counted = params.failuresPerIp.consume(source);
      if (!counted.allowed) {
        // An id read past the limit (known, or admitted by the allowance), failing: still counted.
        if (known || lane?.admitted) params.failuresPerIp.record(source);
        refused("pre_auth_ip");
        throw rateLimited(
          counted.retryAfterSeconds,
          viaEdge ? edgeLock(params.recentAuthentications, source, counted.retryAfterSeconds) : undefined,
        );
      }
      throw new AppError("agent_auth_failed", "authentication failed");
    }

    const admitted = params.requestsPerAgent.consume(identity.agentId);
    if (!admitted.allowed) {
      refused("per_agent");
      throw rateLimited(admitted.retryAfterSeconds);
    }
    // Only here, authenticated and within its agent's limit: no unauthenticated request, and no
    // token past its own limit, can enter (or evict from) the set.
    params.recentAuthentications.remember(source, presented.tokenId);

    c.set("agent", {
      agentId: identity.agentId,
      assignedWallet: identity.assignedWallet,
      keyRef: identity.keyRef,
      capabilities: identity.capabilities,
      hasPolicy: identity.hasPolicy,
    });
    c.set("tokenId", presented.tokenId);
    if (edgeLane !== undefined) c.header(HEADER_AUTHENTICATED, "1");
    await next();
  };
}

/**
 * The failure limit's decision for reading `tokenId` from `source`, counting the reads already out
 * there for other ids as failures to be: while those and the failures fill the limit, waits for one
 * of the reads to end (reads-in-flight.ts). Bad tokens sent at once are thus read no more than the
 * limit allows, as when sent one by one; a valid token waits for those reads, and is then read.
 * Within the limit, the read is counted here, in the turn that found room for it; `readEnds` ends it.
 */
async function roomToRead(
  failuresPerIp: SlidingWindowLimiter,
  reads: ReadsInFlight,
  source: string,
  tokenId: string,
): Promise<{ decision: LimitDecision; readEnds: (() => void) | undefined }> {
  for (let woken = false; ; woken = true) {
    const decision = failuresPerIp.peek(source);
    if (!decision.allowed) {
      // Woken and leaving without a read: the next waiter learns the limit is full in turn.
      if (woken) reads.wakeNext(source);
      return { decision, readEnds: undefined };
    }
    const others = reads.others(source, tokenId);
    if (others < decision.remaining) {
      const readEnds = reads.start(source, tokenId);
      // Room for more than this one (several reads ended, or failures left the window): the next.
      if (woken && others + 1 < decision.remaining) reads.wakeNext(source);
      return { decision, readEnds };
    }
    await reads.oneEnds(source);
  }
}

/** Each route declares its capability; `read` never reaches a write route (docs/api.md#conventions). */
export function requireCapability(capability: Capability): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (!c.get("agent").capabilities.includes(capability)) {
      throw new AppError("agent_capability_required", `this route needs the '${capability}' capability`);
    }
    await next();
  };
}

/**
 * What the edge is told of a locked-out address (`source`): how long, and the token ids it may
 * still pass; nothing for an address more tokens worked from than that.
 */
function edgeLock(
  recent: RecentAuthentications,
  source: string,
  seconds: number,
): Record<string, string> | undefined {
  const tokens = recent.tokensFrom(source, EDGE_LOCK_TOKENS_AT_MOST);
  if (tokens === undefined) return undefined;
  return { [HEADER_ADDRESS_LOCKED]: String(seconds), [HEADER_ADDRESS_TOKENS]: tokens.join(" ") };
}

/** `headers`: any the answer carries besides Retry-After (the edge's, edgeLock). */
function rateLimited(retryAfterSeconds: number, headers: Record<string, string> = {}): AppError {
  headers["Retry-After"] = String(retryAfterSeconds);
  return new AppError("rate_limited", "too many requests", {
    headers,
    fields: { retry_after: retryAfterSeconds },
  });
}
