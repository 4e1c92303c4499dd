import { randomBytes } from "node:crypto";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NODE_EVENT_TYPES } from "../../shared/event-types.ts";
import { sleep } from "../../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { type FollowedStream, followEvents } from "../../testing/event-stream.ts";
import type { TestResponse } from "../../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { registerAsEdge } from "../../testing/register-as-edge.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import { startWebhookReceiver, type WebhookReceiver } from "../../testing/webhook-receiver.ts";
import { queryRows } from "../db/client.ts";
import { addEndpoint } from "../webhooks/endpoints.ts";
import { ensureWebhookSigningKeyFile } from "../webhooks/signing.ts";
import { updateRegistrationPolicy } from "./policy-repository.ts";

// The node's own events (docs/events.md#registration-events) at the real origin on a real
// Postgres: registration.paused, .at_quota and .at_reserve written once per change however many
// requests are refused, in the transaction of the change; delivered to a webhook endpoint on
// loopback that verifies them, and never to an agent's stream. The test acts as the edge, as
// register.int.test.ts does.

const EDGE_SECRET = randomBytes(32).toString("hex");
const ENV = {
  AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
  AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
  AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
  AGENT_WEBHOOKS_RETRY_SECONDS: "0,1,1",
  AGENT_WEBHOOKS_ALLOW_PRIVATE: "true",
};

let nextAddress = 1;
/** A public address no other request of the file uses (81.3.0.0/16 is ordinary unicast space). */
function publicIp(): string {
  const n = nextAddress++;
  return `81.3.${n >> 8}.${n & 255}`;
}

type NodeEvent = { id: string; type: string; data: Record<string, unknown> };

describe("the node's registration events (real Postgres, the origin, a webhook receiver)", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let receiver: WebhookReceiver;
  /** A publicly registered agent's stream, open throughout: no node event may reach it. */
  let agentStream: FollowedStream;
  let agentId: string;
  const db = () => testDb.handle.db;

  const register = (ip = publicIp()): Promise<TestResponse> => registerAsEdge(origin.base, EDGE_SECRET, ip);
  const setPolicy = (changes: Parameters<typeof updateRegistrationPolicy>[1]["changes"]) =>
    updateRegistrationPolicy(db(), { changes, reason: "test", source: "cli" });
  const nodeEvents = async (type: string): Promise<NodeEvent[]> =>
    queryRows<NodeEvent>(
      db(),
      sql`select id::text as id, type, data from events where agent_id is null and type = ${type} order by id`,
    );
  const issuedTotal = async (): Promise<number> =>
    (await queryRows<{ n: number }>(db(), sql`select count(*)::int as n from registration_issued`))[0]!.n;
  const freeKeys = async (): Promise<number> =>
    (
      await queryRows<{ n: number }>(db(), sql`select count(*)::int as n from key_pool where status = 'free'`)
    )[0]!.n;
  /** The change `statement` makes, in a transaction rolled back: it must leave no event. */
  const rolledBack = async (statement: string): Promise<void> => {
    const client = new pg.Client({ connectionString: testDb.url });
    await client.connect();
    try {
      await client.query("begin");
      await client.query(statement);
      await client.query("rollback");
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 40);
    const keyFile = path.join(await mkdtemp(path.join(tmpdir(), "registration-events-")), "webhook.key");
    await ensureWebhookSigningKeyFile(keyFile);
    origin = await startTestOrigin({
      database: testDb.handle,
      env: { ...ENV, AGENT_WEBHOOKS_SIGNING_KEY_FILE: keyFile },
      workers: ["webhooks"],
    });
    receiver = await startWebhookReceiver();
    await receiver.loadKeys(`${origin.base}/.well-known/webhooks/keys`);
    const endpoint = await addEndpoint(db(), { url: `${receiver.url}/hook`, events: NODE_EVENT_TYPES });
    receiver.secret = endpoint.secret;
    await setPolicy({ paused: false });
    const agent = await register();
    expect(agent.status).toBe(201);
    agentId = (agent.body as { agent_id: string }).agent_id;
    agentStream = followEvents({
      url: `${origin.base}/agent/v1/events?after=0`,
      token: (agent.body as { token: string }).token,
    });
  });
  // The defaults again after each test, whatever it left (a failure included), registration open.
  afterEach(async () => {
    await setPolicy({ paused: false, networkDaily: 100, totalCeiling: 1000, keyReserve: 10 });
  });
  afterAll(async () => {
    agentStream?.close();
    await receiver?.close();
    await origin?.close();
    await testDb?.drop();
  });

  it("registration.paused: once when registration is paused, none while it stays paused or when the change rolls back", async () => {
    await rolledBack("update registration_policy set paused = true");
    expect(await nodeEvents("registration.paused")).toEqual([]);

    await setPolicy({ paused: true, networkDaily: 77 });
    await setPolicy({ paused: true, networkDaily: 78 });
    await setPolicy({ paused: false });
    const events = await nodeEvents("registration.paused");
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toEqual({
      settings: {
        paused: true,
        per_ip_daily: 3,
        network_daily: 77,
        total_ceiling: 1000,
        key_reserve: 10,
        attempts_per_ip_per_minute: 10,
        attempts_global_per_minute: 120,
      },
      at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
  });

  it("registration.at_quota: one event for a storm of refusals at the total ceiling, the next after an issuance", async () => {
    await rolledBack(
      "update registration_refusal_state set refusing = 'total_ceiling', day = current_date where singleton = 1",
    );
    expect(await nodeEvents("registration.at_quota")).toEqual([]);

    await setPolicy({ totalCeiling: (await issuedTotal()) + 1 });
    expect((await register()).status).toBe(201);
    const storm = await Promise.all(Array.from({ length: 25 }, () => register()));
    expect(storm.map((answer) => answer.status)).toEqual(Array(25).fill(503));
    const events = await nodeEvents("registration.at_quota");
    expect(events).toHaveLength(1);
    const issued = await issuedTotal();
    expect(events[0]!.data).toEqual({
      quota: "total_ceiling",
      limit: issued,
      counters: {
        issued_total: issued,
        issued_today: issued,
        utc_day: new Date().toISOString().slice(0, 10),
      },
      at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });

    // Room for one more: the issuance ends the refusal, so reaching the ceiling again is a change.
    await setPolicy({ totalCeiling: issued + 1 });
    expect((await register()).status).toBe(201);
    for (let i = 0; i < 5; i++) expect((await register()).status).toBe(503);
    expect(await nodeEvents("registration.at_quota")).toHaveLength(2);
  });

  it("registration.at_reserve: one event for a storm of refusals at the key reserve", async () => {
    await setPolicy({ keyReserve: await freeKeys() });
    const storm = await Promise.all(Array.from({ length: 25 }, () => register()));
    expect(storm.map((answer) => answer.status)).toEqual(Array(25).fill(503));
    const events = await nodeEvents("registration.at_reserve");
    expect(events).toHaveLength(1);
    const free = await freeKeys();
    expect(events[0]!.data).toEqual({
      key_stock: { free, reserve: free, issuable_before_reserve: 0 },
      at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
  });

  it("a node event reaches the webhook endpoint subscribed to it, verified, and never an agent's stream", async () => {
    const written = [
      ...(await nodeEvents("registration.paused")),
      ...(await nodeEvents("registration.at_quota")),
      ...(await nodeEvents("registration.at_reserve")),
    ];
    expect(written.length).toBeGreaterThanOrEqual(4);
    const deadline = Date.now() + 20_000;
    while (receiver.received.length < written.length && Date.now() < deadline) await sleep(100);
    await sleep(1_000);
    expect(
      receiver.received.map((delivery) => delivery.body.data.event_id).sort(),
      "one delivery per node event",
    ).toEqual(written.map((event) => event.id).sort());
    for (const delivery of receiver.received) {
      expect(delivery.v1 && delivery.v1a).toBe(true);
      const event = written.find((each) => each.id === delivery.body.data.event_id)!;
      expect(delivery.body.type).toBe(event.type);
      expect(delivery.body.data).toEqual({ ...event.data, event_id: event.id });
    }
    // The agent's stream, open from before the first of them, is served past them all (the agent's
    // own event written after them arrives), yet carried none: it holds that one event alone.
    await db().execute(
      sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address)
          values (${agentId}::uuid, 'transfer', 'after-node-events', 'test', 1, '0x00000000000000000000000000000000000000aa')`,
    );
    await agentStream.waitForCount(1);
    await sleep(500);
    expect(agentStream.events.map((event) => event.type)).toEqual(["action.requested"]);
    expect(agentStream.closedReason()).toBeUndefined();
  });
});
