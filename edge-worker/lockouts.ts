/**
 * The gateway's pre-auth lockout, held at the edge too (docs/security.md#floods-and-what-they-still-get).
 * Once the origin has answered a client address 429 for its failed authentications, naming the
 * address locked for some seconds and the token ids that worked from it lately
 * (origin/auth/bearer-auth.ts), the edge answers that address's requests itself until the lock
 * ends, as the origin would answer them:
 *  - a request whose token id the origin named, or answered authenticated since, is passed on;
 *  - a request without a well-formed token is refused;
 *  - any other token id goes through the same lockout allowance the origin keeps
 *    (shared/lockout-allowance.ts): the few it admits are passed on, naming the lane they came by,
 *    so an id this edge told to come back enters the origin's come-back lane too; the rest are
 *    refused with the allowance's Retry-After.
 * A flood of new bad tokens from a locked address then costs the origin a few requests a minute
 * rather than one per token. What is passed on, the origin judges again.
 *
 * Kept in the isolate's memory: another isolate, or one started since, forwards until the origin
 * names the lock to it. Addresses are keyed as the edge sees them, where the origin counts an IPv6
 * address by its /64: the edge refuses less than the origin would there, never more.
 */
import { parseBearerHeader } from "../shared/agent-token.ts";
import {
  HEADER_ADDRESS_LOCKED,
  HEADER_ADDRESS_TOKENS,
  HEADER_AUTHENTICATED,
  HEADER_LOCKOUT_LANE,
} from "../shared/constants.ts";
import { LockoutAllowance } from "../shared/lockout-allowance.ts";
import type { EdgeConfig } from "./config.ts";
import { errorResponse } from "./errors.ts";
import { clientAddress, type FetchOrigin, forwardToOrigin, originHeaders } from "./proxy.ts";
import { RememberedRefusals } from "./remembered-refusals.ts";

/** Locked addresses remembered at once; past it the oldest is forgotten (the origin refuses it again). */
export const REMEMBERED_LOCKS = 10_000;

/**
 * Paths under `{base}` whose GET takes no token: the origin answers it without authenticating, so
 * it is passed on whatever the lockouts (edge-worker/lockouts.int.test.ts checks this list against
 * the origin's operations). Another method of them is the gateway's and authenticates, so it goes
 * through the lockouts like the rest. Registration has its own handler.
 */
export const PUBLIC_AGENT_PATHS: readonly string[] = ["/agent/v1/openapi.json"];

/** The private answer headers of the lockout, never shown to the client. */
const PRIVATE_ANSWER_HEADERS = [HEADER_ADDRESS_LOCKED, HEADER_ADDRESS_TOKENS, HEADER_AUTHENTICATED];

export class EdgeLockouts {
  /** Address → the token ids that may pass while it is locked. */
  private readonly locks: RememberedRefusals<Set<string>>;
  private readonly allowance: LockoutAllowance;

  constructor(now: () => number = Date.now) {
    this.locks = new RememberedRefusals(REMEMBERED_LOCKS, now);
    this.allowance = new LockoutAllowance({ now });
  }

  /**
   * `{base}/agent/v1/*` but registration: forwarded as passThrough does, unless the client's
   * address is locked (above).
   */
  async handle(
    fetchOrigin: FetchOrigin,
    request: Request,
    config: EdgeConfig,
    requestId: string,
  ): Promise<Response> {
    const clientIp = clientAddress(request);
    const lock = clientIp === undefined ? undefined : this.locks.lookup(clientIp);
    let tokenId: string | undefined;
    let lane: string | undefined;
    if (clientIp !== undefined && lock !== undefined) {
      tokenId = parseBearerHeader(request.headers.get("authorization"))?.tokenId;
      if (tokenId === undefined) return rateLimited(lock.secondsLeft, requestId);
      if (!lock.value.has(tokenId)) {
        const admitted = this.allowance.admit(clientIp, tokenId);
        if (!admitted.admitted) return rateLimited(admitted.retryAfterSeconds, requestId);
        lane = admitted.lane;
      }
    }
    // Made only for a request that is forwarded: a refusal above costs no copy of its headers.
    const headers = originHeaders(request, config, clientIp);
    if (lane !== undefined) headers.set(HEADER_LOCKOUT_LANE, lane);
    const url = new URL(request.url);
    const response = await forwardToOrigin(fetchOrigin, request, {
      originUrl: config.originUrl,
      pathAndQuery: url.pathname + url.search,
      headers,
      requestId,
    });
    if (!PRIVATE_ANSWER_HEADERS.some((name) => response.headers.has(name))) return response;
    if (clientIp !== undefined) this.observe(clientIp, tokenId, response);
    const answer = new Response(response.body, response);
    for (const name of PRIVATE_ANSWER_HEADERS) answer.headers.delete(name);
    return answer;
  }

  /** Takes in what the origin said of the address and of the token it was sent. */
  private observe(clientIp: string, tokenId: string | undefined, response: Response): void {
    const locked = Number(response.headers.get(HEADER_ADDRESS_LOCKED));
    if (Number.isSafeInteger(locked) && locked > 0) {
      const tokens = (response.headers.get(HEADER_ADDRESS_TOKENS) ?? "").split(" ").filter(Boolean);
      this.locks.remember(clientIp, locked, new Set(tokens));
    } else if (tokenId !== undefined && response.headers.get(HEADER_AUTHENTICATED) === "1") {
      this.locks.lookup(clientIp)?.value.add(tokenId);
    }
  }
}

/** The origin's pre-auth 429, made here. */
function rateLimited(retryAfterSeconds: number, requestId: string): Response {
  return errorResponse(
    "rate_limited",
    "too many requests",
    requestId,
    { "retry-after": String(retryAfterSeconds) },
    { retry_after: retryAfterSeconds },
  );
}
