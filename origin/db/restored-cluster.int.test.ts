import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { authenticatedApp } from "../../testing/authenticated-app.ts";
import { followEvents } from "../../testing/event-stream.ts";
import { copyDatabaseRows } from "../../testing/logical-copy.ts";
import { type OwnPostgres, startOwnPostgres } from "../../testing/own-postgres.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { createEventFeed, type EventFeed } from "../events/feed.ts";
import type { EventStream } from "../events/stream.ts";
import { createStreamCap } from "../events/stream-cap.ts";
import { eventsStreamHandler } from "../events/stream-route.ts";
import { createLogger } from "../logger.ts";
import { type RunningServer, startHttpServer } from "../server.ts";
import { addEndpoint } from "../webhooks/endpoints.ts";
import { fanOutOnce } from "../webhooks/fan-out.ts";
import { type Db, queryRows } from "./client.ts";
import { type MigrateResult, migrateDatabase } from "./migrate.ts";
import { rebaseRestoredEventLog } from "./restored-cluster.ts";

// A database restored from a logical dump into another cluster (pg_dump and pg_restore, or a move to
// another server) keeps its rows but not the cluster's transaction counter: the event log's rows,
// a webhook endpoint's place and its snapshot name transaction ids the new cluster reaches only
// much later. The old cluster here has run 20,000 more transactions than the new one; the copy is
// made row by row, as pg_restore makes it (testing/logical-copy.ts). The migration step each start
// runs is what finds it. Real clusters, the real stream route, feed and authentication over HTTP,
// and the webhooks' real fan-out.

describe("the event log of a database restored from a backup into another cluster", () => {
  let before: OwnPostgres;
  let after: OwnPostgres;
  let feed: EventFeed;
  let server: RunningServer;
  const open = new Set<EventStream>();
  let agent: { agentId: string; token: string };
  let endpointId: string;
  let lastOldEventId: string;
  let migratedOnTheOldCluster: MigrateResult;
  let migratedAfterTheRestore: MigrateResult;
  /** The newest event and webhook delivery ids the backup holds, and those handed out after it. */
  const ids = { backup: { event: 0n, delivery: 0n }, sinceBackup: { event: 0n, delivery: 0n } };
  const restored = (): Db => after.database.handle.db;

  /** An event of the agent's log, and the notification its writers send. */
  const writeEvent = async (db: Db, agentId: string | null, type: string): Promise<string> => {
    const [row] = await queryRows<{ id: string }>(
      db,
      sql`with written as (insert into events (agent_id, type, data) values (${agentId}::uuid, ${type}, '{}'::jsonb) returning id)
          select id::text as id, pg_notify('events', id::text) from written`,
    );
    return row!.id;
  };
  const newestIds = async (db: Db): Promise<{ event: bigint; delivery: bigint }> => {
    const [row] = await queryRows<{ event: string; delivery: string }>(
      db,
      sql`select (select coalesce(max(id), 0) from events)::text as event,
                 (select coalesce(max(id), 0) from webhook_deliveries)::text as delivery`,
    );
    return { event: BigInt(row!.event), delivery: BigInt(row!.delivery) };
  };
  const deliveredEventIds = async (db: Db): Promise<string[]> =>
    (
      await queryRows<{ event_id: string }>(
        db,
        sql`select event_id::text as event_id from webhook_deliveries where endpoint_id = ${endpointId}::uuid order by webhook_deliveries.event_id`,
      )
    ).map((row) => row.event_id);

  beforeAll(async () => {
    before = await startOwnPostgres();
    after = await startOwnPostgres();
    // The old cluster has lived longer: 20,000 transaction ids (one subtransaction each) past the new one.
    await before.database.handle.db.execute(sql`do $$ begin
        create temp table burn (n int);
        for n in 1..20000 loop begin insert into burn values (n); exception when others then null; end; end loop;
      end $$`);
    const old = before.database.handle.db;
    await seedFreeKeys(old, 1);
    const issued = await provisionedIdentity(old, { capabilities: ["read"], origin: "operator" });
    agent = { agentId: issued.agentId, token: issued.token };
    endpointId = (await addEndpoint(old, { url: "https://hooks.example.com/in", events: ["finding.raised"] }))
      .id;
    // Two events the endpoint had queued before the dump, then one it had not reached yet.
    await writeEvent(old, agent.agentId, "finding.raised");
    await writeEvent(old, agent.agentId, "finding.raised");
    expect(await fanOutOnce(old, { maxPending: 100 })).toMatchObject({ ran: true, deliveries: 2 });
    lastOldEventId = await writeEvent(old, agent.agentId, "finding.raised");

    migratedOnTheOldCluster = await migrateDatabase(old);

    await copyDatabaseRows(before.database.url, after.database.url);
    ids.backup = await newestIds(old);
    // The old database went on after the backup was taken: these ids were handed out, and are lost with it.
    await writeEvent(old, agent.agentId, "finding.raised");
    await writeEvent(old, agent.agentId, "finding.raised");
    expect(await fanOutOnce(old, { maxPending: 100 })).toMatchObject({ ran: true, deliveries: 3 });
    ids.sinceBackup = await newestIds(old);
    await before.database.drop();
    // What every start runs first: the origin's, `npm run migrate`, `npm start`.
    migratedAfterTheRestore = await migrateDatabase(restored());

    feed = createEventFeed({
      db: restored(),
      connectDirect: after.database.handle.connectDirect,
      logger: createLogger("silent"),
      pollMs: 100,
    });
    const app = authenticatedApp(restored());
    app.get(
      "/events",
      eventsStreamHandler({
        db: restored(),
        feed,
        cap: createStreamCap(4),
        open,
        logger: createLogger("silent"),
      }),
    );
    server = await startHttpServer(app, "127.0.0.1", 0);
  });
  afterAll(async () => {
    for (const stream of open) stream.close("shutting_down");
    await server?.close(100);
    await feed?.stop();
    await after?.database.drop();
  });

  it("moves the restored log's ids once, and nothing on the cluster that wrote them", async () => {
    expect(migratedOnTheOldCluster).toEqual({ applied: [], restoredEvents: 0 });
    expect(migratedAfterTheRestore).toEqual({ applied: [], restoredEvents: 3 });
    expect(await migrateDatabase(restored())).toEqual({ applied: [], restoredEvents: 0 });
    // A place at the horizon of a transaction that saw none running is the xmax of the next
    // snapshot when nothing ended since, and an event of the transaction that looks is above it:
    // both are this cluster's own. Mutation: `>=` for the place, or the own event not set apart,
    // moves the whole log.
    let moved: number | undefined;
    await restored()
      .transaction(async (tx) => {
        const t = tx as unknown as Db;
        await t.execute(sql`select pg_current_xact_id()`);
        await t.execute(
          sql`update webhook_endpoints set fan_out_xid = pg_snapshot_xmax(pg_current_snapshot())`,
        );
        await writeEvent(t, agent.agentId, "finding.raised");
        moved = await rebaseRestoredEventLog(t);
        throw new Error("undone");
      })
      .catch(() => {});
    expect(moved).toBe(0);
  });

  it("a stream resumed after its last event gets the events written since the restore, in order", async () => {
    const stream = followEvents({
      url: `${server.url}/events`,
      token: agent.token,
      lastEventId: lastOldEventId,
    });
    try {
      await stream.waitForOpen();
      const written = [
        await writeEvent(restored(), agent.agentId, "finding.raised"),
        await writeEvent(restored(), agent.agentId, "finding.raised"),
      ];
      await stream.waitForCount(2, 10_000);
      expect(stream.events.map((event) => event.id)).toEqual(written);
    } finally {
      stream.close();
    }
  });

  it("a webhook endpoint gets the event it had not reached and those written since, and nothing twice", async () => {
    const written = await writeEvent(restored(), agent.agentId, "finding.raised");
    expect(await deliveredEventIds(restored())).toHaveLength(2);
    await fanOutOnce(restored(), { maxPending: 100 });
    // Every event of the log once: the two queued before the dump, the one it had not reached,
    // and those written since (this one, and the stream test's).
    const logged = await queryRows<{ id: string }>(
      restored(),
      sql`select id::text as id from events order by events.id`,
    );
    expect(logged.map((row) => row.id)).toContain(lastOldEventId);
    expect(logged.map((row) => row.id)).toContain(written);
    expect(await deliveredEventIds(restored())).toEqual(logged.map((row) => row.id));
  });

  it("hands out no event id nor webhook-id the database had handed out after its backup", async () => {
    const written = BigInt(await writeEvent(restored(), agent.agentId, "finding.raised"));
    await fanOutOnce(restored(), { maxPending: 100 });
    expect(ids.sinceBackup.event).toBeGreaterThan(ids.backup.event);
    expect(ids.sinceBackup.delivery).toBeGreaterThan(ids.backup.delivery);
    const [first] = await queryRows<{ event: string; delivery: string }>(
      restored(),
      sql`select (select min(id) from events where id > ${ids.backup.event.toString()}::bigint)::text as event,
                 (select min(id) from webhook_deliveries where id > ${ids.backup.delivery.toString()}::bigint)::text as delivery`,
    );
    // The first of each written since the restore (the delivery's is its `msg_` id) comes after every
    // one the lost days handed out.
    expect(BigInt(first!.event)).toBeGreaterThan(ids.sinceBackup.event);
    expect(BigInt(first!.delivery)).toBeGreaterThan(ids.sinceBackup.delivery);
    expect(written).toBeGreaterThan(ids.sinceBackup.event);
  });
});
