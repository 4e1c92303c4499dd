import { sql } from "drizzle-orm";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { startTestOrigin } from "../../testing/origin.ts";
import { runTool } from "../../testing/run-tool.ts";
import { recordSecret } from "../../testing/secret-sink.ts";
import {
  type DeliveryRow,
  deliveriesOf,
  fanOutRuns,
  fanOutRunsThrough,
  TEST_RETRY as RETRY,
  TEST_TIMEOUT_MS as TIMEOUT_MS,
  until,
  useWebhookFixture,
  webhookEnv,
  writeEvents,
} from "../../testing/webhook-fixture.ts";
import {
  type ReceivedDelivery,
  startWebhookReceiver,
  type WebhookReceiver,
} from "../../testing/webhook-receiver.ts";
import { afterWholeTicks } from "../../testing/worker-ticks.ts";
import { type Db, queryRows } from "../db/client.ts";
import type { Resolve } from "./address-guard.ts";
import { claimDueDeliveries, recordAttempt } from "./deliveries.ts";
import { addEndpoint, removeEndpoint, replayEndpoint } from "./endpoints.ts";
import { sweepExpiredDeliveries } from "./retention.ts";

// Webhook delivery against real parts: Postgres, the origin (two of them on one database), and a
// receiver on loopback that verifies every delivery as a consumer would (testing/webhook-receiver.ts).

/**
 * One delivery of a new endpoint claimed (an attempt on its way), then replayed by the operator
 * before the attempt's answer is recorded: what a replay that overtakes an attempt leaves.
 */
async function attemptOvertakenByReplay(db: Db) {
  const endpoint = await addEndpoint(db, { url: "http://127.0.0.1:9/", events: ["action.held"] });
  const [event] = await queryRows<{ id: string }>(
    db,
    sql`insert into events (agent_id, type, data) values (null, 'action.held', '{}') returning id::text`,
  );
  await db.execute(
    sql`insert into webhook_deliveries (endpoint_id, event_id) values (${endpoint.id}::uuid, ${event!.id}::bigint)`,
  );
  const claim = { limit: 1, leaseSeconds: 60, slots: 1, perEndpoint: 1, inFlight: new Map<string, number>() };
  const [inFlight] = await claimDueDeliveries(db, claim);
  expect(inFlight?.event?.id).toBe(BigInt(event!.id));
  await replayEndpoint(db, { id: endpoint.id, scope: { kind: "event", eventId: BigInt(event!.id) } });
  return { endpoint, claim, inFlight };
}

/**
 * The first three blocks run beside each other (vitest runs adjacent concurrent blocks at once),
 * each its tests in turn: they wait on the origins' schedules far more than they work (the file
 * used a quarter of one core), and each has its own database, origins, receivers and event types.
 * docs/performance.md, "The test suite".
 */
const BESIDE = { concurrent: true } as const;

describe("webhook delivery (real Postgres, two origins, a loopback receiver)", BESIDE, () => {
  const { fixture, receiverFor } = useWebhookFixture({ allowPrivate: true, origins: 2 });

  // The first three run at once, each on its own receiver and event type: the schedule's whole
  // run of failures (most of this block's time) beside two tests of deliveries that succeed. The
  // rest, whose bounds and slot counts another test's hanging or failing receiver could move, in
  // turn after them.
  it.concurrent("ends a delivery failed after the last attempt of the schedule", async () => {
    const { receiver, endpoint } = await receiverFor(["action.reverted"]);
    receiver.answer = () => ({ status: 500 });
    await writeEvents(fixture, "action.reverted", 1, "fails");
    const row = await until(
      "the delivery failed",
      async () => {
        const [first] = await deliveriesOf(fixture, endpoint.id);
        return first?.status === "failed" ? first : undefined;
      },
      20_000,
    );
    expect(row).toMatchObject({ attempts: RETRY.split(",").length, last_http_status: 500 });
  });

  it.concurrent("serves the public key set and verifies every delivery: v1 with standardwebhooks, v1a with node:crypto", async () => {
    const keys = await fetch(`${fixture.origins[1]!.base}/.well-known/webhooks/keys`);
    expect(keys.status).toBe(200);
    const set = (await keys.json()) as { keys: Array<Record<string, string>> };
    expect(set.keys).toHaveLength(1);
    expect(set.keys[0]).toMatchObject({ kty: "OKP", crv: "Ed25519" });
    expect(set.keys[0]!.x).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Object.keys(set.keys[0]!).sort()).toEqual(["crv", "kid", "kty", "x"]);

    const { receiver, endpoint } = await receiverFor(["action.requested"]);
    const ids = await writeEvents(fixture, "action.requested", 3, "verify");
    await writeEvents(fixture, "action.signed", 1, "not subscribed");
    await until("three deliveries", () => receiver.received.length >= 3);
    // A fan-out run through the log since: it took the unsubscribed event, and queued nothing for it.
    await fanOutRunsThrough(fixture);
    expect(await deliveriesOf(fixture, endpoint.id)).toHaveLength(3);
    expect(receiver.received).toHaveLength(3);
    for (const delivery of receiver.received) {
      expect(delivery.v1).toBe(true);
      expect(delivery.v1a).toBe(true);
      expect(delivery.webhookId).toMatch(/^msg_\d+$/);
      expect(delivery.body.type).toBe("action.requested");
      expect(delivery.body.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(delivery.body.data.marker).toBe("verify");
    }
    expect(receiver.received.map((each) => each.body.data.event_id).sort()).toEqual([...ids].sort());
    expect(new Set(receiver.received.map((each) => each.webhookId)).size).toBe(3);
  });

  it.concurrent("two origins on one database deliver each event once between them", async () => {
    const { receiver } = await receiverFor(["action.confirmed"]);
    // A slow receiver keeps deliveries in flight across both origins' ticks.
    receiver.delayMs = 300;
    const ids = await writeEvents(fixture, "action.confirmed", 30, "two origins");
    await until("thirty deliveries", () => receiver.received.length >= 30);
    // A second delivery of any of them would be claimed by a later round of either origin's queue.
    await afterWholeTicks(fixture.origins, "webhooks_delivery", 2);
    const perEvent = new Map<string, number>();
    for (const each of receiver.received)
      perEvent.set(each.body.data.event_id, (perEvent.get(each.body.data.event_id) ?? 0) + 1);
    expect([...perEvent.keys()].sort()).toEqual([...ids].sort());
    expect([...perEvent.values()].every((count) => count === 1)).toBe(true);
    expect(receiver.received.every((each) => each.v1 && each.v1a)).toBe(true);
  });

  it.sequential("a 410 disables the endpoint and ends its queue", async () => {
    const { receiver, endpoint } = await receiverFor(["action.rejected"]);
    receiver.answer = () => ({ status: 410 });
    await writeEvents(fixture, "action.rejected", 1, "gone");
    await until("the endpoint disabled", async () => {
      const [row] = await queryRows<{ enabled: boolean; disabled_reason: string | null }>(
        fixture.db.handle.db,
        sql`select enabled, disabled_reason from webhook_endpoints where id = ${endpoint.id}::uuid`,
      );
      return row && !row.enabled ? row : undefined;
    });
    const before = receiver.received.length;
    await writeEvents(fixture, "action.rejected", 2, "after gone");
    // A fan-out run through the log since: it read these events, and queued nothing for a disabled endpoint.
    await fanOutRunsThrough(fixture);
    expect(receiver.received.length).toBe(before);
    const rows = await deliveriesOf(fixture, endpoint.id);
    expect(rows[0]).toMatchObject({ status: "disabled", last_http_status: 410, attempts: 1 });
    // Events after the 410 are not queued for a disabled endpoint.
    expect(rows).toHaveLength(1);
  });

  it.sequential("a 3xx is a failure and is not followed", async () => {
    const { receiver, endpoint } = await receiverFor(["action.expired"]);
    receiver.answer = (request) =>
      request.url === "/hook" ? { status: 302, headers: { location: "/elsewhere" } } : { status: 204 };
    await writeEvents(fixture, "action.expired", 1, "redirect");
    await until(
      "two attempts",
      async () => ((await deliveriesOf(fixture, endpoint.id))[0]?.attempts ?? 0) >= 2,
    );
    const [row] = await deliveriesOf(fixture, endpoint.id);
    expect(row).toMatchObject({ last_http_status: 302, last_error: "the receiver answered 302" });
    expect(row!.status).not.toBe("delivered");
    expect(receiver.requests).not.toContain("/elsewhere");
  });

  it.sequential("a receiver that never answers times out after AGENT_WEBHOOKS_TIMEOUT_MS and is retried", async () => {
    const { receiver, endpoint } = await receiverFor(["action.approved"]);
    receiver.answer = () => "hang";
    const started = Date.now();
    await writeEvents(fixture, "action.approved", 1, "hang");
    const row = await until("a timed-out attempt", async () => {
      const [first] = await deliveriesOf(fixture, endpoint.id);
      return first && first.attempts >= 1 ? first : undefined;
    });
    expect(row.last_error).toBe(`timeout: no answer within ${TIMEOUT_MS} ms`);
    expect(row.status).toBe("pending");
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 4_000);
  });

  it.sequential("a receiver that answers 2xx and never ends its body: delivered, and every connection to it closed within AGENT_WEBHOOKS_TIMEOUT_MS", async () => {
    const { receiver, endpoint } = await receiverFor(["action.cancelled"]);
    receiver.answer = () => ({ status: 200, bodyNeverEnds: true });
    const ids = await writeEvents(fixture, "action.cancelled", 10, "body never ends");
    await until("every event delivered", async () => {
      const rows = await deliveriesOf(fixture, endpoint.id);
      return rows.length === ids.length && rows.every((row) => row.status === "delivered");
    });
    const deliveredAt = Date.now();
    // Each attempt, body included, ends at the timeout from its start, before this point: the
    // receiver is left with no connection of the origins' (send.ts), not one per delivery.
    await until(
      "no connection open to the receiver",
      () => receiver.openConnections() === 0,
      TIMEOUT_MS + 1_000,
    );
    expect(Date.now() - deliveredAt).toBeLessThanOrEqual(TIMEOUT_MS + 1_000);
    expect((await deliveriesOf(fixture, endpoint.id)).every((row) => row.attempts === 1)).toBe(true);
  });

  it.sequential("a receiver that answers 2xx and never ends its body holds no more of the origins' connections at once than the endpoint's share of their slots", async () => {
    const { receiver, endpoint } = await receiverFor(["action.abandoned"]);
    receiver.answer = () => ({ status: 200, bodyNeverEnds: true });
    // Far more events than the endpoint's share of two origins' slots (8 each), all due at once.
    const ids = await writeEvents(fixture, "action.abandoned", 60, "many bodies never end");
    await until(
      "every event delivered",
      async () => {
        const rows = await deliveriesOf(fixture, endpoint.id);
        return rows.length === ids.length && rows.every((row) => row.status === "delivered");
      },
      30_000,
    );
    // Each connection is held to the attempt's timeout by the body: one per slot, as a receiver
    // that hangs holds its share, not one per delivery the slots went on to send meanwhile.
    expect(receiver.peakConnections()).toBeLessThanOrEqual(2 * 8);
    await until(
      "no connection open to the receiver",
      () => receiver.openConnections() === 0,
      TIMEOUT_MS + 1_000,
    );
  });
});

/** Each event's webhook-ids as the receiver got them, by event id. */
function idsByEvent(receiver: WebhookReceiver): Map<string, Set<string>> {
  const byEvent = new Map<string, Set<string>>();
  for (const each of receiver.received) {
    const set = byEvent.get(each.body.data.event_id) ?? new Set<string>();
    set.add(each.webhookId);
    byEvent.set(each.body.data.event_id, set);
  }
  return byEvent;
}

describe(
  "delivery timing (two origins, a fan-out that polls every 30 s, a schedule that outlasts 30 s)",
  BESIDE,
  () => {
    // 0, 1, 2, then 3 s steps: about 33 s in all, so a receiver down for DOWN_MS stays inside the
    // schedule, and its first events cross five or more of its steps while it is down.
    const SCHEDULE = "0,1,2,3,3,3,3,3,3,3,3,3,3";
    const DOWN_MS = 15_000;
    /** Between the four batches written while the receiver is down. */
    const WRITE_EVERY_MS = 3_000;
    const { fixture, receiverFor } = useWebhookFixture({
      allowPrivate: true,
      origins: 2,
      retry: SCHEDULE,
      fanOutPollMs: 30_000,
      // Its times start at each event's commit; another file's transaction must not hold it back.
      database: "own cluster",
    });

    it.sequential("a delivery starts as its event commits: the events notification wakes the fan-out, not its 30 s poll", async () => {
      const { receiver } = await receiverFor(["action.submitted"]);
      // Past both origins' first fan-out (at start): their next run is 30 s away, so only a wake can
      // queue what follows. And both listening, so that wake is the events notification.
      await until("both origins' first fan-out", async () =>
        (await Promise.all(fixture.origins.map((origin) => fanOutRuns(origin)))).every((runs) => runs >= 1),
      );
      await until("both origins' LISTEN", async () => {
        const [row] = await queryRows<{ n: number }>(
          fixture.db.handle.db,
          sql`select count(*)::int as n from pg_stat_activity
              where datname = current_database() and query = 'LISTEN events'`,
        );
        return row?.n === fixture.origins.length;
      });
      const latencies: number[] = [];
      for (let i = 0; i < 3; i++) {
        const started = Date.now();
        await writeEvents(fixture, "action.submitted", 1, `wake ${i}`);
        await until(`delivery ${i}`, () => receiver.received.length > i);
        latencies.push(Date.now() - started);
      }
      // About 100 ms each on an idle machine; the margin is for a loaded one, far below the poll.
      expect(Math.max(...latencies), `latencies ${latencies.join(", ")} ms`).toBeLessThan(3_000);
      expect(receiver.received.every((each) => each.v1 && each.v1a)).toBe(true);
    });

    // The outage and the Retry-After gap run at once after the wake's latencies (which run alone):
    // each its own receiver, event type and endpoint, and neither bound is near what the other's
    // attempts cost the origins.
    it.concurrent("a receiver down for 15 s gets every event once it is back: at least once, ids unique, each verified (v1 and v1a)", async () => {
      const { receiver, endpoint } = await receiverFor(["action.failed"]);
      // The listening socket closed: every attempt is refused at connect.
      await receiver.stop();
      const downAt = Date.now();
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) {
        ids.push(...(await writeEvents(fixture, "action.failed", 3, `down ${i}`)));
        await sleep(WRITE_EVERY_MS);
      }
      // Each event's first attempt made (the last batch's within a loaded machine's margin); the
      // receiver stays down however long that takes.
      const rows = await until("an attempt at each of the twelve", async () => {
        const now = await deliveriesOf(fixture, endpoint.id);
        return now.length === 12 && now.every((row) => row.attempts >= 1) ? now : undefined;
      });
      expect(rows).toHaveLength(12);
      expect(rows.every((row) => row.status === "pending" && row.attempts >= 1)).toBe(true);
      expect(rows.some((row) => row.attempts >= 3)).toBe(true);
      expect(rows.every((row) => /ECONNREFUSED/.test(row.last_error ?? ""))).toBe(true);
      await sleep(Math.max(0, DOWN_MS - (Date.now() - downAt)));
      await receiver.start();
      await until(
        "every event delivered",
        async () => {
          const now = await deliveriesOf(fixture, endpoint.id);
          return now.length === 12 && now.every((row) => row.status === "delivered");
        },
        30_000,
      );
      const byEvent = idsByEvent(receiver);
      expect([...byEvent.keys()].sort()).toEqual([...ids].sort());
      // The same webhook-id on every attempt of an event, a different one for each event.
      expect([...byEvent.values()].every((set) => set.size === 1)).toBe(true);
      expect(new Set([...byEvent.values()].map((set) => [...set][0])).size).toBe(12);
      expect(receiver.received.every((each) => each.v1 && each.v1a)).toBe(true);
    }, 90_000);

    it.concurrent("honours a receiver's Retry-After on a 503: the next attempt waits for it, not for the schedule's 1 s", async () => {
      const { receiver, endpoint } = await receiverFor(["action.signed"]);
      const attempts: number[] = [];
      receiver.answer = () => {
        attempts.push(Date.now());
        return attempts.length === 1 ? { status: 503, headers: { "retry-after": "4" } } : { status: 204 };
      };
      await writeEvents(fixture, "action.signed", 1, "busy");
      await until(
        "the delivery delivered",
        async () => (await deliveriesOf(fixture, endpoint.id))[0]?.status === "delivered",
        20_000,
      );
      expect(attempts).toHaveLength(2);
      const gap = attempts[1]! - attempts[0]!;
      // Never before the 4 s asked for; at most a worker period (1 s) and a margin after it.
      expect(gap).toBeGreaterThanOrEqual(3_900);
      expect(gap).toBeLessThan(8_000);
      expect((await deliveriesOf(fixture, endpoint.id))[0]).toMatchObject({
        attempts: 2,
        last_http_status: 204,
      });
    });
  },
);

describe("the schedule's first entry (one origin, AGENT_WEBHOOKS_RETRY_SECONDS=3,1,1)", BESIDE, () => {
  const FIRST_SECONDS = 3;
  const SCHEDULE = `${FIRST_SECONDS},1,1`;
  const { fixture, receiverFor } = useWebhookFixture({ allowPrivate: true, origins: 1, retry: SCHEDULE });

  it.sequential("is the wait before the first attempt, of a new delivery and of a replayed one", async () => {
    const { receiver, endpoint } = await receiverFor(["action.held"]);
    const arrivals: number[] = [];
    receiver.answer = () => {
      arrivals.push(Date.now());
      return { status: 204 };
    };
    const [eventId] = await writeEvents(fixture, "action.held", 1, "first wait");
    await until("the first delivery", () => arrivals.length >= 1);
    // When the fan-out queued it: its row's created_at.
    const [row] = await queryRows<{ at: number }>(
      fixture.db.handle.db,
      sql`select (extract(epoch from created_at) * 1000)::float8 as at from webhook_deliveries
          where endpoint_id = ${endpoint.id}::uuid and event_id = ${eventId!}::bigint`,
    );
    expect(arrivals[0]! - row!.at).toBeGreaterThanOrEqual(FIRST_SECONDS * 1000 - 50);
    expect(arrivals[0]! - row!.at).toBeLessThan(FIRST_SECONDS * 1000 + 3_000);
    await sleep(500);

    // The operator's replay, through the tool, starts the schedule from its start: the first wait
    // counts from its commit, before the tool exits.
    const replayed = await runTool("ops/webhooks.ts", ["replay", "--id", endpoint.id, "--event", eventId!], {
      env: {
        ...webhookEnv(fixture.keyFile, { allowPrivate: true, retry: SCHEDULE }),
        DATABASE_URL: fixture.db.url,
        LOG_LEVEL: "silent",
      },
    });
    const replayedAt = Date.now();
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(replayed.stdout).toContain("1 deliveries queued");
    await until("the replayed delivery", () => arrivals.length >= 2);
    expect(arrivals[1]! - replayedAt).toBeGreaterThanOrEqual(FIRST_SECONDS * 1000 - 1_000);
    expect(receiver.received.map((each) => each.body.data.event_id)).toEqual([eventId, eventId]);
  });
});

describe("signing-key rotation (real Postgres, the origin restarted, npm run webhooks -- add-key)", () => {
  const { fixture, closeAfter } = useWebhookFixture({ allowPrivate: true, origins: 1 });

  type KeySet = { keys: Array<Record<string, string>> };
  const keySet = async (): Promise<KeySet> =>
    (await (await fetch(`${fixture.origins[0]!.base}/.well-known/webhooks/keys`)).json()) as KeySet;

  it("a key added to the file is served beside the old one after a restart; each delivery verifies with either set", async () => {
    const [old] = (await keySet()).keys;
    // A receiver that fetched the key set before the rotation.
    const before = await startWebhookReceiver();
    closeAfter(before);
    await before.loadKeys(`${fixture.origins[0]!.base}/.well-known/webhooks/keys`);

    const added = await runTool("ops/webhooks.ts", ["add-key"], {
      env: {
        AGENT_WEBHOOKS_SIGNING_KEY_FILE: fixture.keyFile,
        DATABASE_URL: fixture.db.url,
        LOG_LEVEL: "silent",
      },
    });
    expect(added.code, added.stderr).toBe(0);
    const newKid = /key (\S+) added/.exec(added.stdout)?.[1];
    expect(newKid).toBeDefined();
    await fixture.origins[0]!.close();
    fixture.origins[0] = await startTestOrigin({
      database: fixture.db.handle,
      env: webhookEnv(fixture.keyFile, { allowPrivate: true }),
      workers: ["webhooks"],
    });
    const set = await keySet();
    expect(set.keys.map((jwk) => jwk.kid)).toEqual([newKid, old!.kid]);

    // One receiver trusts only the new key; the one from before trusts only the old.
    const after = await startWebhookReceiver();
    closeAfter(after);
    await after.loadKeys(
      `${fixture.origins[0]!.base}/.well-known/webhooks/keys`,
      (jwk) => jwk.kid === newKid,
    );
    for (const receiver of [before, after]) {
      const endpoint = await addEndpoint(fixture.db.handle.db, {
        url: `${receiver.url}/hook`,
        events: ["action.confirmed"],
      });
      receiver.secret = endpoint.secret;
    }
    await writeEvents(fixture, "action.confirmed", 2, "rotation");
    await until(
      "both receivers' deliveries",
      () => before.received.length >= 2 && after.received.length >= 2,
    );
    for (const receiver of [before, after])
      expect(receiver.received.every((each) => each.v1 && each.v1a)).toBe(true);
  });
});

describe("an endpoint's secret rotation (real Postgres, the origin, npm run webhooks -- rotate-secret)", () => {
  const { fixture, receiverFor } = useWebhookFixture({ allowPrivate: true, origins: 1 });

  /** Whether the standardwebhooks library, given `secret`, accepts the delivery as it came. */
  const verifiesWith = (secret: string, delivery: ReceivedDelivery): boolean => {
    try {
      new Webhook(secret).verify(delivery.raw, delivery.headers);
      return true;
    } catch {
      return false;
    }
  };

  it("the old secret signs beside the new one for the overlap, then only the new one does; the change is audited without either", async () => {
    const { receiver, endpoint } = await receiverFor(["action.confirmed"]);
    const oldSecret = receiver.secret;
    await writeEvents(fixture, "action.confirmed", 1, "before the rotation");
    await until("the first delivery", () => receiver.received.length >= 1);

    const rotated = await runTool(
      "ops/webhooks.ts",
      ["rotate-secret", "--id", endpoint.id, "--json", "--reason", "yearly rotation"],
      { env: { DATABASE_URL: fixture.db.url, LOG_LEVEL: "silent" } },
    );
    expect(rotated.code, rotated.stderr).toBe(0);
    const shown = JSON.parse(rotated.stdout) as { id: string; secret: string; previous_secret_until: string };
    // docs/security.md#webhooks: the new secret is never logged either (the run's secret scan).
    recordSecret(shown.secret);
    expect(shown.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(shown.secret).not.toBe(oldSecret);
    const hoursLeft = (Date.parse(shown.previous_secret_until) - Date.now()) / 3_600_000;
    expect(hoursLeft).toBeGreaterThan(23.9);
    expect(hoursLeft).toBeLessThanOrEqual(24);

    // During the overlap: a receiver holding either secret verifies, one v1 per secret.
    await writeEvents(fixture, "action.confirmed", 1, "during the overlap");
    await until("the overlap's delivery", () => receiver.received.length >= 2);
    const during = receiver.received[1]!;
    expect(
      during.headers["webhook-signature"].split(" ").filter((each) => each.startsWith("v1,")),
    ).toHaveLength(2);
    expect(verifiesWith(oldSecret, during)).toBe(true);
    expect(verifiesWith(shown.secret, during)).toBe(true);
    expect(verifiesWith(oldSecret, receiver.received[0]!)).toBe(true);

    // The overlap's end brought forward, as the clock passing it would: only the new one signs.
    await fixture.db.handle.db.execute(
      sql`update webhook_endpoints set previous_secret_until = now() - interval '1 second'
          where id = ${endpoint.id}::uuid`,
    );
    await writeEvents(fixture, "action.confirmed", 1, "after the overlap");
    await until("the delivery after the overlap", () => receiver.received.length >= 3);
    const after = receiver.received[2]!;
    expect(
      after.headers["webhook-signature"].split(" ").filter((each) => each.startsWith("v1,")),
    ).toHaveLength(1);
    expect(verifiesWith(shown.secret, after)).toBe(true);
    expect(verifiesWith(oldSecret, after)).toBe(false);
    // A tampered body verifies with neither.
    expect(
      verifiesWith(shown.secret, {
        ...after,
        raw: after.raw.replace("after the overlap", "after the overlaq"),
      }),
    ).toBe(false);

    const changes = await queryRows<{
      change: string;
      before: string | null;
      after: string;
      reason: string;
      source: string;
    }>(
      fixture.db.handle.db,
      sql`select change, before, after, reason, source from webhook_endpoint_changes
          where endpoint_id = ${endpoint.id}::uuid`,
    );
    expect(changes).toEqual([
      expect.objectContaining({ change: "rotate_secret", reason: "yearly rotation", source: "cli" }),
    ]);
    expect(JSON.stringify(changes)).not.toContain(oldSecret.slice("whsec_".length));
    expect(JSON.stringify(changes)).not.toContain(shown.secret.slice("whsec_".length));
  });
});

describe("the delivery claim (real Postgres)", () => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase({ maxConnections: 8 });
  });
  afterAll(async () => {
    await testDb.drop();
  });

  it("claims made at once from several connections never share a delivery", async () => {
    const db = testDb.handle.db;
    const endpoint = await addEndpoint(db, { url: "http://127.0.0.1:9/", events: ["action.signed"] });
    await db.execute(
      sql`insert into events (agent_id, type, data) select null, 'action.signed', '{}' from generate_series(1, 400)`,
    );
    await db.execute(
      sql`insert into webhook_deliveries (endpoint_id, event_id) select ${endpoint.id}::uuid, id from events`,
    );
    const claimed: bigint[] = [];
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (;;) {
          const batch = await claimDueDeliveries(db, {
            limit: 5,
            leaseSeconds: 60,
            slots: 5,
            perEndpoint: 5,
            inFlight: new Map(),
          });
          if (batch.length === 0) return;
          claimed.push(...batch.map((each) => each.id));
        }
      }),
    );
    expect(claimed).toHaveLength(400);
    expect(new Set(claimed).size).toBe(400);
  });

  it("a replay that comes while an attempt is in flight stands: the attempt's answer, recorded after it, neither delivers nor fails the replayed delivery", async () => {
    // Mutation: recordAttempt's guard without `replays` records the first attempt's 200 over the
    // replay (delivered, never sent again), and its failure as attempt 1 of the old schedule.
    const db = testDb.handle.db;
    for (const outcome of [
      { kind: "delivered", httpStatus: 200 } as const,
      {
        kind: "failed",
        httpStatus: 500,
        error: "the receiver answered 500",
        retryAfterSeconds: undefined,
      } as const,
    ]) {
      const { endpoint, claim, inFlight } = await attemptOvertakenByReplay(db);
      await recordAttempt(db, {
        delivery: inFlight!,
        outcome,
        retrySeconds: [0, 60, 600],
        random: 0,
        leaseSeconds: 60,
      });
      const [row] = await queryRows<{ status: string; attempts: number }>(
        db,
        sql`select status, attempts from webhook_deliveries where endpoint_id = ${endpoint.id}::uuid`,
      );
      expect(row, outcome.kind).toMatchObject({ status: "pending", attempts: 0 });
      // Due now: the next claim sends it again.
      const [again] = await claimDueDeliveries(db, claim);
      expect(again?.id, outcome.kind).toBe(inFlight!.id);
      await removeEndpoint(db, endpoint.id);
    }
  });

  it("a replay that comes while an attempt is in flight stands against a 410 too: the endpoint stays enabled, the replayed delivery due", async () => {
    const db = testDb.handle.db;
    // The operator replays it (the receiver is back) while the attempt is on its way; its 410
    // comes after.
    const { endpoint, claim, inFlight } = await attemptOvertakenByReplay(db);
    await recordAttempt(db, {
      delivery: inFlight!,
      outcome: { kind: "gone", httpStatus: 410 },
      retrySeconds: [0, 60, 600],
      random: 0,
      leaseSeconds: 60,
    });
    const [state] = await queryRows<{ enabled: boolean; status: string; attempts: number }>(
      db,
      sql`select w.enabled, d.status, d.attempts from webhook_endpoints w
          join webhook_deliveries d on d.endpoint_id = w.id where w.id = ${endpoint.id}::uuid`,
    );
    expect(state).toEqual({ enabled: true, status: "pending", attempts: 0 });
    const [again] = await claimDueDeliveries(db, claim);
    expect(again?.id).toBe(inFlight!.id);
    // The attempt the replay queued is the one whose 410 counts.
    await recordAttempt(db, {
      delivery: again!,
      outcome: { kind: "gone", httpStatus: 410 },
      retrySeconds: [0, 60, 600],
      random: 0,
      leaseSeconds: 60,
    });
    const [gone] = await queryRows<{ enabled: boolean; status: string }>(
      db,
      sql`select w.enabled, d.status from webhook_endpoints w
          join webhook_deliveries d on d.endpoint_id = w.id where w.id = ${endpoint.id}::uuid`,
    );
    expect(gone).toEqual({ enabled: false, status: "disabled" });
    await removeEndpoint(db, endpoint.id);
  });

  it("the retention sweep deletes, in batches, deliveries untouched for AGENT_EVENTS_RETENTION_DAYS days, and nothing newer", async () => {
    const db = testDb.handle.db;
    const endpoint = await addEndpoint(db, { url: "http://127.0.0.1:9/", events: ["action.held"] });
    // More old rows than one batch (5,000), then recent ones of every status.
    await db.execute(
      sql`insert into webhook_deliveries (endpoint_id, event_id, status, updated_at)
          select ${endpoint.id}::uuid, n, (array['delivered','failed','disabled','pending'])[1 + n % 4],
                 now() - interval '31 days'
          from generate_series(1, 5200) n`,
    );
    await db.execute(
      sql`insert into webhook_deliveries (endpoint_id, event_id, status, updated_at)
          select ${endpoint.id}::uuid, n, (array['delivered','failed','disabled','pending'])[1 + n % 4],
                 now() - interval '29 days'
          from generate_series(10001, 10040) n`,
    );
    expect(await sweepExpiredDeliveries(db, 30)).toBe(5200);
    const left = await queryRows<{ n: number; oldest: string }>(
      db,
      sql`select count(*)::int as n, min(event_id)::text as oldest from webhook_deliveries
          where endpoint_id = ${endpoint.id}::uuid`,
    );
    expect(left[0]).toEqual({ n: 40, oldest: "10001" });
    expect(await sweepExpiredDeliveries(db, 30)).toBe(0);
  });
});

describe("webhooks never reach a private address unless allowed (real Postgres, the origin)", () => {
  let receiver: WebhookReceiver;
  let rebinds = 0;
  // A name that resolves to a public address when checked and to loopback when the socket
  // connects: only the connect-time check can refuse it.
  const resolve: Resolve = async (hostname) => {
    if (hostname === "rebind.example") return rebinds++ % 2 === 0 ? ["93.184.216.34"] : ["127.0.0.1"];
    if (hostname === "inside.example") return ["10.1.2.3"];
    if (hostname === "localhost") return ["127.0.0.1", "::1"];
    throw new Error("not found");
  };
  const { fixture, closeAfter } = useWebhookFixture({ allowPrivate: false, origins: 1, resolve });
  beforeAll(async () => {
    receiver = closeAfter(await startWebhookReceiver());
  });

  it("refuses literal private addresses, names that resolve to one, and a name that re-resolves to one at connect time", async () => {
    const port = new URL(receiver.url).port;
    const urls = [
      `http://127.0.0.1:${port}/hook`,
      `http://[::1]:${port}/hook`,
      `http://[::ffff:127.0.0.1]:${port}/hook`,
      "http://169.254.169.254/latest/meta-data",
      "http://10.0.0.1/hook",
      `http://localhost:${port}/hook`,
      "http://inside.example/hook",
      `http://rebind.example:${port}/hook`,
    ];
    // Inserted as a database reader could, past `add`'s own check: delivery checks again.
    const endpoints: Array<{ id: string }> = [];
    for (const url of urls)
      endpoints.push(await addEndpoint(fixture.db.handle.db, { url, events: ["action.held"] }));
    await writeEvents(fixture, "action.held", 1, "private");
    const rows = await until("a failed attempt to every endpoint", async () => {
      const all = await Promise.all(endpoints.map(async (each) => (await deliveriesOf(fixture, each.id))[0]));
      return all.every((row) => row && row.attempts >= 1) ? (all as DeliveryRow[]) : undefined;
    });
    // Nothing reached the receiver on loopback, whatever the name or the literal.
    expect(receiver.requests).toEqual([]);
    for (const [i, row] of rows.entries()) {
      const expected = urls[i]!.includes("rebind") ? /^EPRIVATEADDRESS: / : /^private_address: /;
      expect(row.last_error, urls[i]).toMatch(expected);
      expect(row.status).toBe("pending");
    }
  });
});
