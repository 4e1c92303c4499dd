import { randomBytes } from "node:crypto";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { AppError, errorBody } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import { SlidingWindowLimiter } from "../http/rate-limiter.ts";
import { bearerAuth } from "./bearer-auth.ts";
import { issueToken } from "./token.ts";

function appWith(lookup: Parameters<typeof bearerAuth>[0]["lookup"], perAgent = 600): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use("*", async (c, next) => {
    c.set("requestId", "req_test");
    c.set("clientIp", "203.0.113.9");
    await next();
  });
  app.use(
    "*",
    bearerAuth({
      lookup,
      failuresPerIp: new SlidingWindowLimiter({ limit: 60, windowSeconds: 60 }),
      requestsPerAgent: new SlidingWindowLimiter({ limit: perAgent, windowSeconds: 60 }),
    }),
  );
  app.get("/x", (c) => c.text("ok"));
  app.onError((error, c) =>
    error instanceof AppError
      ? c.json(errorBody(error.code, error.message, "req_test"), error.status)
      : c.text("bug", 500),
  );
  return app;
}

const token = () => `Bearer agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`;

describe("bearerAuth", () => {
  it("answers 503, not 401 or 500, when the identity store cannot be read, and counts no failure", async () => {
    // A fake for a fault the database cannot produce on cue.
    const app = appWith(() => Promise.reject(new Error("connection terminated")));
    for (let i = 0; i < 70; i++) {
      const response = await app.request("/x", { headers: { authorization: token() } });
      expect(response.status).toBe(503);
      expect(await response.json()).toMatchObject({ error: { code: "service_unavailable" } });
    }
  });

  it("lets no more than 60 failed attempts from one IP through, even when all arrive before any fails", async () => {
    // A slow lookup (a fake: the database cannot be made slow on cue) keeps every attempt in
    // flight at once, which is exactly when a check-then-count limiter would let all of them by.
    const lookup = () => new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 50));
    const app = appWith(lookup);
    const statuses = await Promise.all(
      Array.from(
        { length: 100 },
        async () => (await app.request("/x", { headers: { authorization: token() } })).status,
      ),
    );
    expect(statuses.filter((status) => status === 401)).toHaveLength(60);
    expect(statuses.filter((status) => status === 429)).toHaveLength(40);
  });

  it("never holds back successful requests from one IP, however many are in flight at once", async () => {
    const issued = issueToken();
    const identity = {
      tokenId: issued.tokenId,
      agentId: "agent-1",
      secretHash: issued.secretHash,
      enabled: true,
      revoked: false,
      capabilities: ["read" as const],
      assignedWallet: `0x${"11".repeat(20)}` as const,
      keyRef: "key-1",
    };
    // The same slow lookup (a fake, as above), answering with a valid identity.
    const lookup = () => new Promise<typeof identity>((resolve) => setTimeout(() => resolve(identity), 50));
    const app = appWith(lookup, 1_000);
    const statuses = await Promise.all(
      Array.from(
        { length: 200 },
        async () =>
          (await app.request("/x", { headers: { authorization: `Bearer ${issued.token}` } })).status,
      ),
    );
    expect(statuses.filter((status) => status === 200)).toHaveLength(200);
  });
});
