import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import type { TestResponse } from "../../testing/http.ts";
import { backendPid, waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { registerAsEdge } from "../../testing/register-as-edge.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import { hashIpGroup } from "./ip-classification.ts";
import { updateRegistrationPolicy } from "./policy-repository.ts";
import { ALL_GROUPS } from "./quota-gate.ts";

// A registration judged in one window (a UTC day, a minute of the attempt counts) and refused
// once that window is over, because it waited meanwhile (on the policy lock behind other nodes'
// issuances, on the attempt counts' rows). Its Retry-After names what is left of the window it was
// judged in: none, so 1 s, not a whole new window it was never judged in. Real origin, real
// Postgres; the test acts as the edge (docs/api.md#registration-quotas-and-counters).

const POLICY_LOCK = "^select 1 from registration_policy where id = 1 for update";
const ATTEMPT_COUNTS = "^insert into registration_attempts";

const EDGE_SECRET = randomBytes(32).toString("hex");
const IP_SECRET = randomBytes(32).toString("hex");
const ENV = {
  AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
  AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
  AGENT_REGISTRATION_IP_SECRET: IP_SECRET,
};

const time = { now: 0 };
const clock = { now: () => new Date(time.now) };

function register(origin: TestOrigin, ip: string): Promise<TestResponse> {
  return registerAsEdge(origin.base, EDGE_SECRET, ip);
}

function retryAfterOf(response: TestResponse): number {
  expect(response.status).toBe(429);
  const retryAfter = Number(response.headers["retry-after"]);
  expect(response.body).toMatchObject({
    error: { code: "registration_rate_limited", retry_after: retryAfter },
  });
  return retryAfter;
}

describe("a registration refused once the window it was judged in is over", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  const db = () => testDb.handle.db;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 40);
    origin = await startTestOrigin({ database: testDb.handle, env: ENV, clock, workers: [] });
  });
  afterAll(async () => {
    await origin?.close();
    await testDb?.drop();
  });

  it("the day's network-wide quota, filled while it waited for the lock past midnight: Retry-After 1, and it registers at once", async () => {
    time.now = Date.parse("2031-05-06T23:59:59.000Z");
    await updateRegistrationPolicy(db(), {
      changes: { paused: false, networkDaily: 1, keyReserve: 0 },
      reason: "test",
    });
    let pending: Promise<TestResponse> | undefined;
    // Another node's issuance: it holds the policy lock and takes the day's last place, while this
    // request, judged on a day with room, waits behind it; midnight passes meanwhile.
    await db().transaction(async (tx) => {
      await tx.execute(sql`select 1 from registration_policy where id = 1 for update`);
      await tx.execute(
        sql`insert into registration_admissions (day, ip_group, count) values ('2031-05-06', ${ALL_GROUPS}, 1)`,
      );
      pending = register(origin, "81.3.0.1");
      await waitUntilBlockedBy(db(), {
        holder: await backendPid(tx),
        statement: POLICY_LOCK,
        what: "the registration waiting for the policy lock",
      });
      time.now = Date.parse("2031-05-07T00:00:02.000Z");
    });
    // 2031-05-06 is over: nothing is left to wait for. Told the seconds to the next UTC day from
    // now, the client waited until the 8th, a whole day it was never refused on.
    expect(retryAfterOf(await pending!)).toBe(1);
    expect((await register(origin, "81.3.0.1")).status).toBe(201);
  });

  it("the group's attempts of a minute, used up on another node while it waited for their row past the minute: Retry-After 1, and it registers at once", async () => {
    time.now = Date.parse("2031-05-08T10:00:59.500Z");
    await updateRegistrationPolicy(db(), {
      changes: { paused: false, networkDaily: 100, keyReserve: 0 },
      reason: "test",
    });
    const ip = "81.3.0.2";
    let pending: Promise<TestResponse> | undefined;
    // Another node admitting the group's attempts of 10:00: it holds their row, and commits the
    // minute's tenth once the clock is past 10:01.
    await db().transaction(async (tx) => {
      await tx.execute(
        sql`insert into registration_attempts (minute, ip_group, count)
            values ('2031-05-08T10:00:00Z', ${hashIpGroup(IP_SECRET, ip)}, 10)`,
      );
      pending = register(origin, ip);
      await waitUntilBlockedBy(db(), {
        holder: await backendPid(tx),
        statement: ATTEMPT_COUNTS,
        what: "the registration's admission waiting for the group's attempt counts",
      });
      time.now = Date.parse("2031-05-08T10:01:00.500Z");
    });
    // The minute of 10:00 is over; told the seconds to 10:02, the client waited a minute for nothing.
    expect(retryAfterOf(await pending!)).toBe(1);
    expect((await register(origin, ip)).status).toBe(201);
  });
});
