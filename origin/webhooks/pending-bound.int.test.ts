import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { untilEventsServable } from "../../testing/events-horizon.ts";
import { runTool } from "../../testing/run-tool.ts";
import {
  deliveriesOf,
  fanOutRunsThrough,
  TEST_TIMEOUT_MS,
  until,
  useWebhookFixture,
  type WebhookFixture,
  writeEvents,
} from "../../testing/webhook-fixture.ts";
import type { WebhookReceiver } from "../../testing/webhook-receiver.ts";
import { afterWholeTicks } from "../../testing/worker-ticks.ts";
import { queryRows } from "../db/client.ts";
import { claimDueDeliveries, recordAttempt } from "./deliveries.ts";
import { addEndpoint, removeEndpoint, replayEndpoint } from "./endpoints.ts";
import { fanOutOnce } from "./fan-out.ts";

// The bound on an endpoint's pending deliveries (AGENT_WEBHOOKS_MAX_PENDING), each endpoint's own
// place in the log, and the drain of a receiver that is back (docs/operations.md#webhooks),
// against real parts: Postgres, the origin's workers, receivers on loopback.

const BOUND = 5;

/** The endpoint's pending deliveries now. */
const pendingOf = async (fixture: WebhookFixture, endpointId: string): Promise<number> =>
  (
    await queryRows<{ n: number }>(
      fixture.db.handle.db,
      sql`select count(*)::int as n from webhook_deliveries
          where endpoint_id = ${endpointId}::uuid and status = 'pending'`,
    )
  )[0]!.n;

/** Reads the endpoint's pending count every 50 ms until stopped; the most it saw. */
function samplePending(fixture: WebhookFixture, endpointId: string): { stop(): Promise<number> } {
  let max = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      max = Math.max(max, await pendingOf(fixture, endpointId));
      await sleep(50);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return max;
    },
  };
}

/** Each received event's webhook-ids, by event id. */
function idsByEvent(receiver: WebhookReceiver): Map<string, Set<string>> {
  const byEvent = new Map<string, Set<string>>();
  for (const each of receiver.received) {
    const set = byEvent.get(each.body.data.event_id) ?? new Set<string>();
    set.add(each.webhookId);
    byEvent.set(each.body.data.event_id, set);
  }
  return byEvent;
}

// The three blocks with an origin run beside each other (adjacent concurrent blocks run at once),
// each its tests in turn (it.sequential): they wait on their origins' schedules and timeouts more
// than they work, and each has its own database, origin and receivers (docs/performance.md, "The
// test suite").
describe.concurrent(`an endpoint's queue is bounded (AGENT_WEBHOOKS_MAX_PENDING=${BOUND}, one origin, loopback receivers)`, () => {
  // Short steps, and enough of them that no delivery ends failed while its receiver is away.
  const SCHEDULE = "0,1,2,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3";
  const { fixture, receiverFor } = useWebhookFixture({
    allowPrivate: true,
    origins: 1,
    retry: SCHEDULE,
    maxPending: BOUND,
  });

  it.sequential("a receiver that is down never has more pending deliveries than the bound; back, it gets every event once, queued in log order", async () => {
    const { receiver, endpoint } = await receiverFor(["action.confirmed"]);
    await receiver.stop();
    const sampler = samplePending(fixture, endpoint.id);
    const ids: string[] = [];
    // Events keep coming while the queue is full: one every 100 ms, then a few fan-out periods.
    for (let i = 0; i < 20; i++) {
      ids.push(...(await writeEvents(fixture, "action.confirmed", 1, `bounded ${i}`)));
      await sleep(100);
    }
    // The queue fills to its bound, each delivery tried once, however long a loaded machine takes;
    // then a few fan-out runs more, in which it must not go past it.
    await until(
      "the queue at its bound, each delivery tried",
      async () => {
        const now = await deliveriesOf(fixture, endpoint.id);
        return now.length >= BOUND && now.every((row) => row.attempts >= 1);
      },
      30_000,
    );
    await fanOutRunsThrough(fixture, 2);
    expect(await sampler.stop()).toBe(BOUND);
    // Nothing more than the bound was queued, and the endpoint's place is after the fifth event.
    const rows = await deliveriesOf(fixture, endpoint.id);
    expect(rows.map((row) => row.event_id)).toEqual(ids.slice(0, BOUND));
    expect(rows.every((row) => row.status === "pending" && row.attempts >= 1)).toBe(true);
    const [place] = await queryRows<{ event_id: string }>(
      fixture.db.handle.db,
      sql`select fan_out_event_id::text as event_id from webhook_endpoints where id = ${endpoint.id}::uuid`,
    );
    expect(place!.event_id).toBe(ids[BOUND - 1]);

    // What an operator sees: the count and that the endpoint is at its bound.
    const listed = await runTool("ops/webhooks.ts", ["list", "--json"], {
      env: { DATABASE_URL: fixture.db.url, LOG_LEVEL: "silent", AGENT_WEBHOOKS_MAX_PENDING: String(BOUND) },
    });
    expect(listed.code, listed.stderr).toBe(0);
    const shown = (JSON.parse(listed.stdout) as Array<Record<string, unknown>>).find(
      (each) => each.id === endpoint.id,
    );
    expect(shown).toMatchObject({ pending: BOUND, at_bound: true, enabled: true });

    await receiver.start();
    const all = await until(
      "every event delivered",
      async () => {
        const now = await deliveriesOf(fixture, endpoint.id);
        return now.length === ids.length && now.every((row) => row.status === "delivered") ? now : undefined;
      },
      40_000,
    );
    expect(all.map((row) => row.event_id)).toEqual(ids);
    const byEvent = idsByEvent(receiver);
    expect([...byEvent.keys()].sort()).toEqual([...ids].sort());
    // Once each (no attempt in flight was sent again), one webhook-id per event, each its own.
    expect(receiver.received).toHaveLength(ids.length);
    expect([...byEvent.values()].every((set) => set.size === 1)).toBe(true);
    const webhookIds = ids.map((id) => [...byEvent.get(id)!][0]!);
    expect(new Set(webhookIds).size).toBe(ids.length);
    // The queue followed the log: each event's delivery was queued after the one before it.
    const queued = webhookIds.map((id) => BigInt(id.slice("msg_".length)));
    expect(queued.every((id, i) => i === 0 || id > queued[i - 1]!)).toBe(true);
    expect(receiver.received.every((each) => each.v1 && each.v1a)).toBe(true);
    await removeEndpoint(fixture.db.handle.db, endpoint.id);
  }, 90_000);

  it.sequential("an endpoint at its bound behind a hanging receiver does not hold back a healthy one on the same events", async () => {
    const hanging = await receiverFor(["action.submitted"]);
    hanging.receiver.answer = () => "hang";
    const healthy = await receiverFor(["action.submitted"]);
    const sampler = samplePending(fixture, hanging.endpoint.id);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      ids.push(...(await writeEvents(fixture, "action.submitted", 1, `two endpoints ${i}`)));
      await sleep(100);
    }
    const lastWritten = Date.now();
    await until("the healthy receiver's twenty events", () => healthy.receiver.received.length >= ids.length);
    const tookMs = Date.now() - lastWritten;
    expect(await sampler.stop()).toBe(BOUND);
    // Each hanging attempt holds one of the hanging endpoint's own slots for the 1 s timeout; the
    // healthy one's go on in the others (the slots' own test is below). Far less than the hanging
    // endpoint's retries (it never answers).
    expect(tookMs, `the last delivery ${tookMs} ms after the last event`).toBeLessThan(10_000);
    expect([...idsByEvent(healthy.receiver).keys()].sort()).toEqual([...ids].sort());
    expect((await deliveriesOf(fixture, hanging.endpoint.id)).map((row) => row.event_id)).toEqual(
      ids.slice(0, BOUND),
    );
    const places = await queryRows<{ id: string; event_id: string }>(
      fixture.db.handle.db,
      sql`select id, fan_out_event_id::text as event_id from webhook_endpoints
          where id in (${hanging.endpoint.id}::uuid, ${healthy.endpoint.id}::uuid)`,
    );
    const placeOf = (id: string) => places.find((each) => each.id === id)!.event_id;
    expect(placeOf(hanging.endpoint.id)).toBe(ids[BOUND - 1]);
    // The healthy one is past every event (after its last one, or at the log's horizon: id 0).
    expect(placeOf(healthy.endpoint.id) === ids.at(-1) || placeOf(healthy.endpoint.id) === "0").toBe(true);
    for (const each of [hanging, healthy]) await removeEndpoint(fixture.db.handle.db, each.endpoint.id);
  }, 60_000);
});

describe.concurrent("a hanging receiver holds its own delivery slots, no others (one origin, the default bound)", () => {
  const { fixture, receiverFor } = useWebhookFixture({ allowPrivate: true, origins: 1 });

  it.sequential("a healthy endpoint on the same events as a hanging one gets every event within 3 timeouts of the last, however many there are", async () => {
    // Deliveries one fan-out run queues share their due time, and a claim in that order alone
    // takes ties as they lie: put the hanging endpoint first, as half of all pairs are.
    let hanging = await receiverFor(["action.submitted"]);
    let healthy = await receiverFor(["action.submitted"]);
    if (hanging.endpoint.id > healthy.endpoint.id) [hanging, healthy] = [healthy, hanging];
    hanging.receiver.answer = () => "hang";
    // Twenty times the worker's slots: batches that wait for their slowest send (1 s, the
    // timeout, whenever a hanging delivery is among them) take tens of seconds over these.
    const total = 160;
    const within = 3 * TEST_TIMEOUT_MS;
    const ids = await writeEvents(fixture, "action.submitted", total, "slots");
    const lastWritten = Date.now();
    const all = await until(
      "the healthy receiver's every event",
      () => (healthy.receiver.received.length >= total ? true : undefined),
      60_000,
    );
    const tookMs = Date.now() - lastWritten;
    expect(all).toBe(true);
    expect(tookMs, `the healthy receiver's last event ${tookMs} ms after the last was written`).toBeLessThan(
      within,
    );
    expect([...idsByEvent(healthy.receiver).keys()].sort()).toEqual([...ids].sort());
    // The hanging one was tried meanwhile: its deliveries waited out their timeouts beside.
    expect(hanging.receiver.requests.length).toBeGreaterThan(0);
    for (const each of [hanging, healthy]) await removeEndpoint(fixture.db.handle.db, each.endpoint.id);
  }, 90_000);
});

describe.concurrent("a receiver that is back drains at once (one origin, a schedule whose second step is 300 s)", () => {
  const { fixture, receiverFor } = useWebhookFixture({ allowPrivate: true, origins: 1, retry: "0,300,300" });

  type Row = { status: string; attempts: number; last_http_status: number | null; next_attempt_at: string };
  const rowOf = async (endpointId: string, eventId: string): Promise<Row | undefined> =>
    (
      await queryRows<Row>(
        fixture.db.handle.db,
        sql`select status, attempts, last_http_status, next_attempt_at::text as next_attempt_at
            from webhook_deliveries where endpoint_id = ${endpointId}::uuid and event_id = ${eventId}::bigint`,
      )
    )[0];

  it.sequential("a success makes the endpoint's timed-out deliveries due now; one it answered 500 keeps its schedule", async () => {
    const made = await receiverFor(["action.held"]);
    const endpointId = made.endpoint.id;
    const answer = (next: WebhookReceiver["answer"]): void => {
      made.receiver.answer = next;
    };
    // A: no answer within the timeout, then 300 s to its next attempt.
    answer(() => "hang");
    const [timedOut] = await writeEvents(fixture, "action.held", 1, "timed out");
    await until("A's first attempt", async () => {
      const row = await rowOf(endpointId, timedOut!);
      return row && row.attempts === 1 ? row : undefined;
    });
    // C: answered 500, then 300 s to its next attempt.
    answer(() => ({ status: 500 }));
    const [refused] = await writeEvents(fixture, "action.held", 1, "answered 500");
    const refusedBefore = await until("C's first attempt", async () => {
      const row = await rowOf(endpointId, refused!);
      return row && row.attempts === 1 ? row : undefined;
    });
    expect(refusedBefore).toMatchObject({ status: "pending", last_http_status: 500 });
    const timedOutBefore = (await rowOf(endpointId, timedOut!))!;
    expect(timedOutBefore).toMatchObject({ status: "pending", attempts: 1, last_http_status: null });

    // B is delivered: the receiver is back.
    answer(() => ({ status: 204 }));
    const [succeeded] = await writeEvents(fixture, "action.held", 1, "delivered");
    await until("B delivered", async () => (await rowOf(endpointId, succeeded!))?.status === "delivered");
    const timedOutAfter = await until(
      "A delivered, far before its 300 s",
      async () => {
        const row = await rowOf(endpointId, timedOut!);
        return row?.status === "delivered" ? row : undefined;
      },
      10_000,
    );
    expect(timedOutAfter).toMatchObject({ attempts: 2, last_http_status: 204 });
    // C keeps its schedule: not attempted again over the delivery's next rounds, its next attempt
    // where the 500 put it.
    await afterWholeTicks(fixture.origins, "webhooks_delivery", 2);
    expect(await rowOf(endpointId, refused!)).toEqual(refusedBefore);
    expect(made.receiver.received.filter((each) => each.body.data.event_id === refused)).toHaveLength(1);
  }, 60_000);
});

describe("the fan-out's places and the drain (real Postgres, called directly)", () => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb.drop();
  });

  /** Writes the events and waits until they are below the horizon, as a fan-out reads them. */
  const insertEvents = async (types: string[]): Promise<string[]> => {
    const rows = await queryRows<{ id: string }>(
      testDb.handle.db,
      sql`insert into events (agent_id, type, data)
            select null, t, '{}' from unnest(${`{${types.join(",")}}`}::text[]) with ordinality as u(t, n)
            order by n
            returning id::text as id`,
    );
    await untilEventsServable(testDb.handle.db);
    return rows.map((row) => row.id);
  };

  it("stops an endpoint after the last event it took and goes on from there: every subscribed event, none twice, none skipped", async () => {
    const db = testDb.handle.db;
    const endpoint = await addEndpoint(db, { url: "http://127.0.0.1:9/", events: ["action.held"] });
    // Subscribed events among others, more than several bounds' worth.
    const types = Array.from({ length: 40 }, (_, i) => (i % 3 === 0 ? "action.signed" : "action.held"));
    const ids = await insertEvents(types);
    const subscribed = ids.filter((_, i) => types[i] === "action.held");
    const queued: string[] = [];
    for (let run = 0; run < 20 && queued.length < subscribed.length; run++) {
      const result = await fanOutOnce(db, { maxPending: 4 });
      expect(result.ran).toBe(true);
      const pending = await queryRows<{ event_id: string }>(
        db,
        sql`select event_id::text as event_id from webhook_deliveries
            where endpoint_id = ${endpoint.id}::uuid and status = 'pending' order by id`,
      );
      expect(pending.length).toBeLessThanOrEqual(4);
      // At its bound, a run reads nothing for it; under it, it has nothing more to take.
      const again = await fanOutOnce(db, { maxPending: 4 });
      expect(again).toMatchObject({ ran: true, deliveries: 0, atBound: pending.length === 4 ? 1 : 0 });
      if (pending.length === 4) expect(again).toMatchObject({ events: 0 });
      queued.push(...pending.map((row) => row.event_id));
      await db.execute(
        sql`update webhook_deliveries set status = 'delivered' where endpoint_id = ${endpoint.id}::uuid`,
      );
    }
    expect(queued).toEqual(subscribed);
    await removeEndpoint(db, endpoint.id);
  });

  it("an event whose transaction began before the endpoint was added and committed after it is queued; one committed before is not", async () => {
    const db = testDb.handle.db;
    // Two writers, each a transaction open across the endpoint's add: a money batch's transaction
    // spans its enclave signing, so one is in flight whenever an operator adds an endpoint.
    const early = new pg.Client({ connectionString: testDb.url });
    const late = new pg.Client({ connectionString: testDb.url });
    await early.connect();
    await late.connect();
    try {
      const write = async (client: pg.Client): Promise<string> => {
        await client.query("begin");
        const { rows } = await client.query<{ id: string }>(
          "insert into events (agent_id, type, data) values (null, 'action.reverted', '{}') returning id::text as id",
        );
        return rows[0]!.id;
      };
      // `early` holds the horizon back, so `before`, committed before the add, is above it.
      await write(early);
      const before = await write(late);
      await late.query("commit");
      await sleep(50);
      const during = await write(late);
      await sleep(50);
      const endpoint = await addEndpoint(db, { url: "http://127.0.0.1:9/", events: ["action.reverted"] });
      await late.query("commit");
      await early.query("rollback");
      const [after] = await insertEvents(["action.reverted"]);
      await fanOutOnce(db, { maxPending: 10 });
      const rows = await queryRows<{ event_id: string }>(
        db,
        sql`select event_id::text as event_id from webhook_deliveries where endpoint_id = ${endpoint.id}::uuid
            order by event_id`,
      );
      // `during` was committed after the endpoint was added: it is the endpoint's; `before` is not.
      expect(rows.map((row) => row.event_id)).toEqual([during, after]);
      expect(before).toBeDefined();
      // A replay of everything since it was added queues the same, nothing before it.
      await db.execute(sql`delete from webhook_deliveries where endpoint_id = ${endpoint.id}::uuid`);
      expect(await replayEndpoint(db, { id: endpoint.id, scope: { kind: "all" } })).toBe(2);
      await removeEndpoint(db, endpoint.id);
    } finally {
      await early.end();
      await late.end();
    }
  });

  it("names an endpoint whose place the retention sweep deleted", async () => {
    const db = testDb.handle.db;
    const endpoint = await addEndpoint(db, { url: "http://127.0.0.1:9/", events: ["action.expired"] });
    const [first, second] = await insertEvents(["action.expired", "action.expired"]);
    expect(await fanOutOnce(db, { maxPending: 1 })).toMatchObject({ deliveries: 1, behindRetention: [] });
    // Its place is the first event; the sweep deletes it before the endpoint has room again.
    await db.execute(sql`delete from events where id = ${first!}::bigint`);
    await db.execute(
      sql`update webhook_deliveries set status = 'delivered' where endpoint_id = ${endpoint.id}::uuid`,
    );
    expect(await fanOutOnce(db, { maxPending: 1 })).toMatchObject({
      deliveries: 1,
      behindRetention: [endpoint.id],
    });
    const rows = await queryRows<{ event_id: string }>(
      db,
      sql`select event_id::text as event_id from webhook_deliveries where endpoint_id = ${endpoint.id}::uuid
          order by id`,
    );
    expect(rows.map((row) => row.event_id)).toEqual([first, second]);
    await removeEndpoint(db, endpoint.id);
  });

  it("the drain leaves a delivery in flight alone: only those waiting past a lease become due", async () => {
    const db = testDb.handle.db;
    const endpoint = await addEndpoint(db, { url: "http://127.0.0.1:9/", events: ["action.rejected"] });
    const [inFlight, succeeded, waiting] = await insertEvents([
      "action.rejected",
      "action.rejected",
      "action.rejected",
    ]);
    // Three deliveries that got no answer once: two due now, one in 300 s.
    await db.execute(
      sql`insert into webhook_deliveries (endpoint_id, event_id, attempts, last_error, next_attempt_at)
          select ${endpoint.id}::uuid, e.id, 1, 'timeout', case when e.id = ${waiting!}::bigint
                 then now() + interval '300 seconds' else now() - interval '1 second' end
          from events e where e.id in (${inFlight!}::bigint, ${succeeded!}::bigint, ${waiting!}::bigint)`,
    );
    const claimed = await claimDueDeliveries(db, {
      limit: 2,
      leaseSeconds: 60,
      slots: 2,
      perEndpoint: 2,
      inFlight: new Map(),
    });
    expect(claimed.map((each) => String(each.event?.id)).sort()).toEqual([inFlight, succeeded].sort());
    // One of the two claimed is delivered while the other is still being sent.
    await recordAttempt(db, {
      delivery: claimed.find((each) => String(each.event?.id) === succeeded)!,
      outcome: { kind: "delivered", httpStatus: 204 },
      retrySeconds: [0, 300],
      random: 0,
      leaseSeconds: 60,
    });
    const rows = await queryRows<{ event_id: string; status: string; due: boolean | null }>(
      db,
      sql`select event_id::text as event_id, status,
                 case when status = 'pending' then next_attempt_at <= now() end as due
          from webhook_deliveries where endpoint_id = ${endpoint.id}::uuid order by event_id`,
    );
    expect(rows).toEqual([
      { event_id: inFlight, status: "pending", due: false },
      { event_id: succeeded, status: "delivered", due: null },
      { event_id: waiting, status: "pending", due: true },
    ]);
    await removeEndpoint(db, endpoint.id);
  });

  it("a claim gives each endpoint with work its share of the slots, at most the cap, less what it has in flight here", async () => {
    const db = testDb.handle.db;
    const [a, b, c] = await Promise.all(
      ["a", "b", "c"].map((name) =>
        addEndpoint(db, { url: `http://127.0.0.1:9/${name}`, events: ["action.held"] }),
      ),
    );
    // A's twenty are due before B's twenty; C has none due.
    await db.execute(
      sql`insert into webhook_deliveries (endpoint_id, event_id, next_attempt_at)
          select case when n <= 20 then ${a!.id}::uuid else ${b!.id}::uuid end, 900000 + n,
                 now() - interval '1 hour' + n * interval '1 second'
          from generate_series(1, 40) n`,
    );
    const claim = async (limit: number, inFlight: Array<[string, number]>) => {
      const claimed = await claimDueDeliveries(db, {
        limit,
        leaseSeconds: 60,
        slots: 8,
        perEndpoint: 6,
        inFlight: new Map(inFlight),
      });
      return [a!, b!].map((each) => claimed.filter((row) => row.endpointId === each.id).length);
    };
    // Two with work: 4 each, though A's are all due first.
    expect(await claim(8, [])).toEqual([4, 4]);
    // A has its 4 in flight here: none more for it; B has room for its 4.
    expect(await claim(8, [[a!.id, 4]])).toEqual([0, 4]);
    // C has work in flight here, none due: three with work, a share of 3 (8 / 3, up).
    expect(await claim(8, [[c!.id, 2]])).toEqual([3, 3]);
    // B alone with work (A's removed): the cap, 6 of the 8 slots.
    await removeEndpoint(db, a!.id);
    expect(await claim(8, [])).toEqual([0, 6]);
    for (const each of [b!, c!]) await removeEndpoint(db, each.id);
  });

  it("an endpoint a 410 disabled is queued nothing meanwhile; a replay enables it from the log's horizon, with the replayed events", async () => {
    const db = testDb.handle.db;
    const endpoint = await addEndpoint(db, { url: "http://127.0.0.1:9/", events: ["action.approved"] });
    // Disabled as a 410 leaves it (deliveries.ts), then events it does not get.
    await db.execute(sql`update webhook_endpoints set enabled = false where id = ${endpoint.id}::uuid`);
    const [replayed, missed] = await insertEvents(["action.approved", "action.approved"]);
    expect(await fanOutOnce(db, { maxPending: 10 })).toMatchObject({ deliveries: 0 });
    expect(
      await replayEndpoint(db, { id: endpoint.id, scope: { kind: "event", eventId: BigInt(replayed!) } }),
    ).toBe(1);
    const [after] = await insertEvents(["action.approved"]);
    await fanOutOnce(db, { maxPending: 10 });
    const rows = await queryRows<{ event_id: string }>(
      db,
      sql`select event_id::text as event_id from webhook_deliveries where endpoint_id = ${endpoint.id}::uuid
          order by event_id`,
    );
    expect(rows.map((row) => row.event_id)).toEqual([replayed, after]);
    expect(missed).toBeDefined();
    await removeEndpoint(db, endpoint.id);
  });
});
