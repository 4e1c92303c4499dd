/**
 * A Hono app with the gateway's real bearer authentication against a test database, and the
 * request context the origin's own middleware would set (a request id, a client address, not via
 * the edge): for a test that serves one route, such as the event stream, without the whole origin.
 * The caller adds its route, and any middleware it needs after the authentication.
 */
import { Hono } from "hono";
import { bearerAuth } from "../origin/auth/bearer-auth.ts";
import { createTokenLookup } from "../origin/auth/identity-repository.ts";
import { RecentAuthentications } from "../origin/auth/recent-authentications.ts";
import type { Db } from "../origin/db/client.ts";
import type { AppEnv } from "../origin/http/env.ts";
import { LockoutAllowance } from "../shared/lockout-allowance.ts";
import { SlidingWindowLimiter } from "../shared/rate-limiter.ts";

export function authenticatedApp(db: Db): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use("*", async (c, next) => {
    c.set("requestId", "req_test");
    c.set("clientIp", "198.18.0.9");
    c.set("viaEdge", false);
    await next();
  });
  app.use(
    "*",
    bearerAuth({
      lookup: createTokenLookup(db),
      failuresPerIp: new SlidingWindowLimiter({ limit: 60, windowSeconds: 60 }),
      recentAuthentications: new RecentAuthentications(),
      lockoutAllowance: new LockoutAllowance(),
      requestsPerAgent: new SlidingWindowLimiter({ limit: 600, windowSeconds: 60 }),
    }),
  );
  return app;
}
