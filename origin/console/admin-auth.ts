import { createHash, timingSafeEqual } from "node:crypto";
import type { Context, MiddlewareHandler } from "hono";
import { bearerCredentials } from "../../shared/authorization.ts";
import {
  HEADER_ADMIN_API_TOKEN,
  HEADER_CONSOLE_SESSION,
  HEADER_REGISTRATION_ADMIN_TOKEN,
} from "../../shared/constants.ts";
import type { Operator } from "../../shared/operator.ts";
import type { SlidingWindowLimiter } from "../../shared/rate-limiter.ts";
import { AppError } from "../errors.ts";
import { addressGroup } from "../http/client-ip.ts";
import type { AppEnv } from "../http/env.ts";
import type { RefusalCounter } from "../http/refusals.ts";
import type { Logger } from "../logger.ts";

/**
 * Ours: failed console authentications per client (IPv4 address or IPv6 /64), per 60 s sliding
 * window, past which every console request of that client is 429 until the window frees, as the
 * gateway's pre-auth tier does. Lower than the gateway's 60: an operator does not mistype twenty
 * times a minute, and every guess an attacker is denied costs the operator nothing.
 */
export const ADMIN_AUTH_FAILURES = { limit: 20, windowSeconds: 60 } as const;

export type AdminAuthParams = {
  /** AGENT_ADMIN_API_TOKEN: `x-admin-api-token`, read access. */
  adminApiToken: string;
  /** AGENT_REGISTRATION_ADMIN_SECRET: `x-registration-admin-token`, needed as well for changes. */
  registrationAdminSecret: string | undefined;
  failuresPerIp: SlidingWindowLimiter;
  refused: RefusalCounter;
  logger: Logger;
  /** The operator of a live session (neither expired nor ended), or null: read at every request. */
  findSession: (token: string) => Promise<Operator | null>;
};

export type AdminAuth = {
  /**
   * `x-admin-api-token`: read access to the console API
   * (docs/operations.md#the-operator-console-and-metrics).
   */
  read: MiddlewareHandler<AppEnv>;
  /** `x-admin-api-token` and `x-registration-admin-token`, needed as well for changes. */
  change: MiddlewareHandler<AppEnv>;
  /** The admin token as `x-admin-api-token` or `Authorization: Bearer …` (Prometheus scrapers). */
  scrape: MiddlewareHandler<AppEnv>;
  /** 429 for a client past its failures, before a route that authenticates on its own (sign-in). */
  notBlocked: MiddlewareHandler<AppEnv>;
  /** Counts a failed authentication of the client and answers the error to throw: 401, or 429 past the limit. */
  failure(c: Context<AppEnv>): AppError;
};

type Presented = (header: (name: string) => string | undefined) => { read: string | undefined };

/**
 * Both tokens (docs/operations.md#the-operator-console-and-metrics) compared in constant time
 * (SHA-256 digests of equal length, both always compared, so neither the length nor which token was
 * wrong shows in the timing); every failure the same 401 body; failures counted per client, 429
 * past the limit. Or, instead of the tokens, a console session (`x-console-session`,
 * docs/operations.md#signing-in-with-a-passkey), looked up at each request: an unknown, expired or
 * ended one is the same 401, counted the same. Needs `clientIp` set before it (clientIpMiddleware).
 */
export function createAdminAuth(params: AdminAuthParams): AdminAuth {
  const matchesRead = digestMatcher(params.adminApiToken);
  const matchesChange = params.registrationAdminSecret
    ? digestMatcher(params.registrationAdminSecret)
    : undefined;

  const failure = (c: Context<AppEnv>): AppError => {
    params.logger.info({ client_ip: c.get("clientIp") }, "admin auth failed");
    const counted = params.failuresPerIp.consume(addressGroup(c.get("clientIp")));
    if (!counted.allowed) {
      params.refused("admin_auth");
      return rateLimited(counted.retryAfterSeconds);
    }
    return new AppError("admin_auth_failed", "admin authentication failed");
  };
  const refuseBlocked = (c: Context<AppEnv>): void => {
    const blocked = params.failuresPerIp.peek(addressGroup(c.get("clientIp")));
    if (!blocked.allowed) {
      params.refused("admin_auth");
      throw rateLimited(blocked.retryAfterSeconds);
    }
  };
  const noCredential = (): AppError => new AppError("admin_auth_failed", "admin authentication failed");
  const changesOff = (): AppError =>
    new AppError("feature_disabled", "console changes need AGENT_REGISTRATION_ADMIN_SECRET on this node");

  const guard = (
    presented: Presented,
    needsChange: boolean,
    sessions: boolean,
  ): MiddlewareHandler<AppEnv> => {
    return async (c, next) => {
      refuseBlocked(c);
      const sessionToken = sessions ? c.req.header(HEADER_CONSOLE_SESSION) : undefined;
      if (sessionToken !== undefined) {
        const operator = await params.findSession(sessionToken);
        if (operator === null) throw failure(c);
        // A session stands in for both tokens, so it changes only where the change token could.
        if (needsChange && !matchesChange) throw changesOff();
        c.set("operator", operator);
        await next();
        return;
      }
      const read = presented((name) => c.req.header(name)).read;
      const change = c.req.header(HEADER_REGISTRATION_ADMIN_TOKEN);
      const readOk = matchesRead(read);
      // Always computed, so a right read token with a wrong change token takes the same time.
      const changeOk = matchesChange ? matchesChange(change) : matchesRead(undefined);
      if (readOk && needsChange && !matchesChange) {
        // Only an operator holding the read token learns that this node takes no changes.
        throw changesOff();
      }
      // No credential at all guesses none: the same 401, counted as no failure. Another site's
      // image tags send none (no page can set these headers on a request to another origin), and
      // where the browser marks them as no other (plain http at a name of the operator's network
      // gets no Sec-Fetch-Site, an image no Origin) they would otherwise lock the operator out.
      if (read === undefined && change === undefined) throw noCredential();
      if (!readOk || (needsChange && !changeOk)) throw failure(c);
      c.set("operator", null);
      await next();
    };
  };

  const headerOnly: Presented = (header) => ({ read: header(HEADER_ADMIN_API_TOKEN) });
  const headerOrBearer: Presented = (header) => {
    const direct = header(HEADER_ADMIN_API_TOKEN);
    if (direct !== undefined) return { read: direct };
    return { read: bearerCredentials(header("authorization")) };
  };
  return {
    read: guard(headerOnly, false, true),
    change: guard(headerOnly, true, true),
    // Scrapers are automation: the admin token, never a person's session.
    scrape: guard(headerOrBearer, false, false),
    notBlocked: async (c, next) => {
      refuseBlocked(c);
      await next();
    },
    failure,
  };
}

/** A constant-time check of a presented value against a secret, over SHA-256 digests. */
function digestMatcher(secret: string): (presented: string | undefined) => boolean {
  const expected = createHash("sha256").update(secret).digest();
  return (presented) =>
    // An absent value is compared too (as the empty string, which never matches a ≥ 32-byte secret).
    timingSafeEqual(
      createHash("sha256")
        .update(presented ?? "")
        .digest(),
      expected,
    ) && presented !== undefined;
}

function rateLimited(retryAfterSeconds: number): AppError {
  return new AppError("rate_limited", "too many failed authentications; retry later", {
    headers: { "Retry-After": String(retryAfterSeconds) },
    fields: { retry_after: retryAfterSeconds },
  });
}
