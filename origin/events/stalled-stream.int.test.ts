import { connect, type Socket } from "node:net";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { authenticatedApp } from "../../testing/authenticated-app.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { AppError, errorBody } from "../errors.ts";
import { createLogger } from "../logger.ts";
import { type RunningServer, startHttpServer } from "../server.ts";
import { createEventFeed, type EventFeed } from "./feed.ts";
import { type EventStream, MAX_QUEUED_EVENTS } from "./stream.ts";
import { createStreamCap } from "./stream-cap.ts";
import { eventsStreamHandler } from "./stream-route.ts";

// A client that stops reading its stream (its process stuck, its loop body blocked) leaves the
// origin's write waiting on a full socket. The service still ends such a stream, when a newer one
// of the token takes its place or when too many events wait for it (docs/events.md#limits): its
// connection is closed, so it holds no place, no subscription and no queued events past the close.
// Against the real database, the real authentication, feed and route, served by the origin's own
// HTTP server on loopback, and a client socket that never reads.

const CLOSE_GRACE_MS = 500;

describe("an event stream whose client stopped reading (real database, the origin's HTTP server)", () => {
  let testDb: TestDatabase;
  let feed: EventFeed;
  let server: RunningServer;
  const open = new Set<EventStream>();
  const db = () => testDb.handle.db;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 4);
    feed = createEventFeed({
      db: db(),
      connectDirect: testDb.handle.connectDirect,
      logger: createLogger("silent"),
      pollMs: 100,
    });
    const app = authenticatedApp(db());
    app.get(
      "/events",
      eventsStreamHandler({
        db: db(),
        feed,
        cap: createStreamCap(4),
        open,
        logger: createLogger("silent"),
        closeGraceMs: CLOSE_GRACE_MS,
      }),
    );
    app.onError((error, c) =>
      error instanceof AppError
        ? c.json(errorBody(error.code, error.message, "req_test", error.fields), error.status)
        : c.text("bug", 500),
    );
    server = await startHttpServer(app, "127.0.0.1", 0);
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await server?.close(100);
    await feed?.stop();
    await testDb?.drop();
  });

  const issue = async (): Promise<{ agentId: string; token: string }> => {
    const issued = await provisionedIdentity(db(), { capabilities: ["read"], origin: "operator" });
    return { agentId: issued.agentId, token: issued.token };
  };

  /** Events of the agent's log, `bytes` of padding each, written in one transaction. */
  const writeEvents = (agentId: string, count: number, bytes: number) =>
    db().execute(
      sql`with written as (
            insert into events (agent_id, type, data)
            select ${agentId}::uuid, 'finding.raised', jsonb_build_object('n', n, 'pad', repeat('x', ${bytes}::int))
            from generate_series(1, ${count}::int) n
            returning id)
          select pg_notify('events', max(id)::text) from written`,
    );

  /** GET /events on a socket that reads nothing once the request is sent: its buffers fill. */
  const stalledStream = async (token: string, query: string): Promise<{ closed: () => boolean }> => {
    const port = new URL(server.url).port;
    const socket = connect(Number(port), "127.0.0.1");
    sockets.push(socket);
    let closed = false;
    socket.on("close", () => {
      closed = true;
    });
    socket.on("error", () => {});
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    socket.pause();
    socket.write(`GET /events${query} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${token}\r\n\r\n`);
    return {
      // A paused socket hears of its end once it reads again.
      closed: () => {
        socket.resume();
        return closed;
      },
    };
  };

  const until = async (what: string, check: () => boolean, ms = 10_000): Promise<void> => {
    for (const end = Date.now() + ms; !check(); await sleep(50)) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    }
  };

  it("a stalled oldest stream a newer one of its token closes has its connection closed, and holds no place", async () => {
    const agent = await issue();
    // More than the sockets' buffers hold on loopback: the origin's write of the backlog waits.
    await writeEvents(agent.agentId, 600, 32_000);
    expect(open.size).toBe(0);
    const stalled = await stalledStream(agent.token, "?after=0");
    await until("the stalled stream to open", () => open.size === 1);
    await sleep(1_000);

    const readers: Response[] = [];
    for (let i = 0; i < 4; i++) {
      const response = await fetch(`${server.url}/events`, {
        headers: { authorization: `Bearer ${agent.token}` },
      });
      expect(response.status).toBe(200);
      readers.push(response);
    }
    try {
      // The fifth stream of the token closed the stalled one: it is gone within the grace, with
      // its subscription, and the token holds the four it may hold.
      await until("the stalled stream to end", () => open.size === 4, CLOSE_GRACE_MS + 5_000);
      expect(feed.size()).toBe(4);
      await until("the stalled client's connection to be closed", () => stalled.closed(), 5_000);
    } finally {
      for (const each of readers) await each.body?.cancel();
    }
    await until("the readers' streams to end", () => open.size === 0);
  });

  it("a stalled stream too many events wait for ends as too_slow, and its queue and connection go with it", async () => {
    const agent = await issue();
    await writeEvents(agent.agentId, 600, 32_000);
    expect(open.size).toBe(0);
    const stalled = await stalledStream(agent.token, "?after=0");
    await until("the stalled stream to open", () => open.size === 1);
    await sleep(1_000);
    // Events the feed hands on while the write waits: past MAX_QUEUED_EVENTS the stream is too slow.
    await writeEvents(agent.agentId, MAX_QUEUED_EVENTS + 100, 10);
    await until("the stalled stream to end", () => open.size === 0, CLOSE_GRACE_MS + 10_000);
    expect(feed.size()).toBe(0);
    await until("the stalled client's connection to be closed", () => stalled.closed(), 5_000);
  });
});
