import { describe, expect, it, vi } from "vitest";
import { createGatewayLimiters } from "../origin/gateway/limits.ts";
import { SlidingWindowLimiter } from "../shared/rate-limiter.ts";
import { sleep } from "../shared/sleep.ts";
import { useMoneyStack, useStackOrigin } from "../testing/stack.ts";
import { createGatewayClient, RateLimited } from "./index.ts";

// events() refused 429 by the gateway's per-agent limit (docs/api.md#rate-limits):
// docs/events.md#from-the-client says it waits the Retry-After before it opens the stream again.
// The real origin's limiter answers the 429; the agent's budget is spent with real reads. The tier
// is 5 requests in 8 s here (600 a minute in the service), so the Retry-After is seconds, not a minute.

type Opened = { at: number; status: number; retryAfterSeconds: number | undefined };

describe("events() after a 429 (real stack)", () => {
  const stack = useMoneyStack({}, { timeoutMs: 180_000 });
  const origin = useStackOrigin("origin with a per-agent tier of 5 in 8 s", stack, () => ({
    limiters: {
      ...createGatewayLimiters(),
      requestsPerAgent: new SlidingWindowLimiter({ limit: 5, windowSeconds: 8 }),
    },
  }));

  // Mutation: the backoff's jitter applied below the Retry-After (0.8 to 1.2 times it) opens the
  // stream again at 0.8 of it, into another 429.
  it("opens the stream again no sooner than the 429's Retry-After, then follows it", async () => {
    const agent = await stack.newAgent();
    const opened: Opened[] = [];
    const watching: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      const url = new URL(input instanceof Request ? input.url : input.toString());
      if (url.pathname.endsWith("/agent/v1/events")) {
        const header = response.headers.get("retry-after");
        opened.push({
          at: Date.now(),
          status: response.status,
          retryAfterSeconds: header === null ? undefined : Number(header),
        });
      }
      return response;
    };
    const client = createGatewayClient({ baseUrl: origin.base, token: agent.token, fetch: watching });

    // The window's budget, spent with reads until the limiter refuses one.
    let refused: unknown;
    while (refused === undefined) {
      const reads = await Promise.allSettled(Array.from({ length: 6 }, () => client.policy()));
      refused = reads.find((read) => read.status === "rejected")?.reason;
    }
    expect(refused).toBeInstanceOf(RateLimited);

    // The jitter's lowest draw, every time: a fake of chance alone, no fault is faked.
    const random = vi.spyOn(Math, "random").mockReturnValue(0);
    const stop = new AbortController();
    const stream = client.events({ signal: stop.signal })[Symbol.asyncIterator]();
    const ended = stream.next();
    try {
      const deadline = Date.now() + 60_000;
      while (!opened.some((open) => open.status === 200) && Date.now() < deadline) {
        await sleep(100);
        // Each open after a 429 must wait that 429's whole Retry-After.
        for (let index = 1; index < opened.length; index++) {
          const before = opened[index - 1]!;
          if (before.status !== 429) continue;
          expect(before.retryAfterSeconds).toBeGreaterThan(0);
          expect(opened[index]!.at - before.at).toBeGreaterThanOrEqual(before.retryAfterSeconds! * 1000);
        }
      }
      expect(opened[0]!.status).toBe(429);
      expect(opened.at(-1)!.status).toBe(200);
    } finally {
      random.mockRestore();
      stop.abort();
      await ended;
    }
  }, 120_000);
});
