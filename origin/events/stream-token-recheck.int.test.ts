import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { authenticatedApp } from "../../testing/authenticated-app.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { rotateToken } from "../auth/rotate-token.ts";
import { AppError, errorBody } from "../errors.ts";
import { revokeIdentity, setIdentityEnabled } from "../identity/identity-admin.ts";
import { createLogger } from "../logger.ts";
import { createEventFeed, type EventFeed } from "./feed.ts";
import type { EventStream } from "./stream.ts";
import { createStreamCap } from "./stream-cap.ts";
import { eventsStreamHandler } from "./stream-route.ts";

// A stream's token is read by authentication, then the stream subscribes to the feed and fixes the
// bound between its backlog (read as history) and what the feed hands on (which can end it). A
// disable, revocation or rotation committed between the two is history to the backlog and never
// reaches the feed, so the route reads the token once more after subscribing. Here the real
// authentication, feed and route run against the real database, and a middleware between the
// authentication and the route holds the request there while the test changes the identity: the
// time a loaded origin may take between the two, made long enough to act in.

describe("an event stream whose token stops authenticating before the stream starts (real database)", () => {
  let testDb: TestDatabase;
  let feed: EventFeed;
  const db = () => testDb.handle.db;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 8);
    feed = createEventFeed({
      db: db(),
      connectDirect: testDb.handle.connectDirect,
      logger: createLogger("silent"),
    });
  });
  afterAll(async () => {
    await feed?.stop();
    await testDb?.drop();
  });

  const opened: Response[] = [];
  afterEach(async () => {
    for (const response of opened.splice(0)) if (!response.bodyUsed) await response.body?.cancel();
  });

  type Agent = { agentId: string; token: string };
  const issue = async (): Promise<Agent> => {
    const issued = await provisionedIdentity(db(), { capabilities: ["read"], origin: "operator" });
    return { agentId: issued.agentId, token: issued.token };
  };

  /**
   * GET /events through the real authentication and route, held after the authentication until
   * `change` has run: the identity changes while the request sits between the two.
   */
  async function streamAfter(agent: Agent, change: () => Promise<void>): Promise<Response> {
    let reachedGate!: () => void;
    const atGate = new Promise<void>((resolve) => {
      reachedGate = resolve;
    });
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    const app = authenticatedApp(db());
    app.use("*", async (_c, next) => {
      reachedGate();
      await gate;
      await next();
    });
    app.get(
      "/events",
      eventsStreamHandler({
        db: db(),
        feed,
        cap: createStreamCap(4),
        open: new Set<EventStream>(),
        logger: createLogger("silent"),
      }),
    );
    app.onError((error, c) =>
      error instanceof AppError
        ? c.json(errorBody(error.code, error.message, "req_test", error.fields), error.status)
        : c.text("bug", 500),
    );

    const pending = app.request("/events", { headers: { authorization: `Bearer ${agent.token}` } });
    await atGate;
    await change();
    openGate();
    const response = await pending;
    opened.push(response);
    return response;
  }

  const disable = (agent: Agent) => async () => {
    const result = await setIdentityEnabled(db(), {
      agentId: agent.agentId,
      enabled: false,
      reason: "between authentication and the stream",
      source: "cli",
    });
    if (!result.ok) throw new Error(result.error);
  };

  it.each([
    ["disabled", disable],
    [
      "revoked",
      (agent: Agent) => async () => {
        const result = await revokeIdentity(db(), {
          agentId: agent.agentId,
          reason: "between",
          source: "cli",
        });
        if (!result.ok) throw new Error(result.error);
      },
    ],
    [
      "replaced by a rotation",
      (agent: Agent) => async () => {
        const result = await rotateToken(db(), { agentId: agent.agentId });
        if (!result.ok) throw new Error(result.error);
      },
    ],
  ])(
    "answers 401 to a stream whose token was %s after its authentication, and subscribes nothing",
    async (_, change) => {
      const agent = await issue();
      const before = feed.size();
      const response = await streamAfter(agent, change(agent));
      expect(response.status).toBe(401);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe("agent_auth_failed");
      expect(feed.size()).toBe(before);
    },
  );

  it("opens the stream when the identity was disabled and enabled again in between: the disable is history", async () => {
    const agent = await issue();
    const response = await streamAfter(agent, async () => {
      await disable(agent)();
      const enabled = await setIdentityEnabled(db(), {
        agentId: agent.agentId,
        enabled: true,
        reason: "back",
        source: "cli",
      });
      if (!enabled.ok) throw new Error(enabled.error);
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
  });
});
