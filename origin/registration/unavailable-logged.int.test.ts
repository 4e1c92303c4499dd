import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, databaseBehindProxy, type TestDatabase } from "../../testing/database.ts";
import { holdLock } from "../../testing/held-lock.ts";
import type { TestResponse } from "../../testing/http.ts";
import { waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { registerAsEdge } from "../../testing/register-as-edge.ts";
import { seedFreeKeys } from "../../testing/seed.ts";
import type { TcpProxy } from "../../testing/tcp-proxy.ts";
import type { DatabaseHandle } from "../db/client.ts";
import { updateRegistrationPolicy } from "./policy-repository.ts";

// A registration the database fails (registration_unavailable, reason `unavailable`) says why in
// the origin's log, as every other route's database failure does: the operator facing a run of
// 503s learns the cause from the log, not by guessing. Real origin, real Postgres behind a TCP
// proxy the test cuts; the test acts as the edge.

const EDGE_SECRET = randomBytes(32).toString("hex");
const ENV = {
  AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
  AGENT_EDGE_SHARED_SECRET: EDGE_SECRET,
  AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
};
const POLICY_LOCK = "^select 1 from registration_policy where id = 1 for update";

describe("a registration the database fails is logged with its cause", () => {
  let testDb: TestDatabase;
  let proxy: TcpProxy;
  let handle: DatabaseHandle;
  let origin: TestOrigin;
  const lines: string[] = [];
  const db = () => testDb.handle.db;

  function register(ip: string): Promise<TestResponse> {
    return registerAsEdge(origin.base, EDGE_SECRET, ip);
  }

  function expectUnavailable(response: TestResponse): void {
    expect(response.status).toBe(503);
    expect(response.body).toMatchObject({
      error: { code: "registration_unavailable", reason: "unavailable" },
    });
  }

  /** The origin's log lines since `from`, parsed. */
  const logged = (from: number): Record<string, unknown>[] =>
    lines.slice(from).map((line) => JSON.parse(line) as Record<string, unknown>);

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(db(), 10);
    ({ proxy, database: handle } = await databaseBehindProxy(testDb.url, { maxConnections: 4 }));
    origin = await startTestOrigin({
      database: handle,
      env: ENV,
      workers: [],
      onLogLine: (line) => lines.push(line),
    });
    await updateRegistrationPolicy(db(), { changes: { paused: false, keyReserve: 0 }, reason: "test" });
  });
  afterAll(async () => {
    await origin?.close();
    await handle?.close();
    await proxy?.close();
    await testDb?.drop();
  });

  it("the policy out of reach: a warning naming the stage and the database's error, and the request line's outcome", async () => {
    const from = lines.length;
    proxy.cut("reset");
    try {
      expectUnavailable(await register("81.5.0.1"));
    } finally {
      proxy.restore();
    }
    const entries = logged(from);
    // Before: the request line alone, with its status and no outcome; the cause was dropped.
    expect(entries).toContainEqual(
      expect.objectContaining({
        msg: "registration unavailable",
        stage: "state",
        err: expect.objectContaining({ message: expect.stringMatching(/^database query failed: ./) }),
      }),
    );
    expect(entries).toContainEqual(
      expect.objectContaining({ msg: "request", status: 503, outcome: "refused", stage: "state" }),
    );
  });

  it("the link lost while its issuance waits for the lock: a warning naming the issuance and the database's error", async () => {
    const hold = await holdLock(db(), sql`select 1 from registration_policy where id = 1 for update`);
    const from = lines.length;
    const pending = register("81.5.0.2");
    await waitUntilBlockedBy(db(), { holder: hold.pid, statement: POLICY_LOCK, what: "the issuance" });
    proxy.cut("reset");
    proxy.restore();
    expectUnavailable(await pending);
    await hold.release();
    expect(logged(from)).toContainEqual(
      expect.objectContaining({
        msg: "registration unavailable",
        stage: "issuance",
        err: expect.objectContaining({ message: expect.stringMatching(/^database query failed: ./) }),
      }),
    );
  });
});
