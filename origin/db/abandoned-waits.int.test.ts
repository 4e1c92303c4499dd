import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { holdLock } from "../../testing/held-lock.ts";
import { blockedBy, waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import {
  connectDatabase,
  type DatabaseHandle,
  queryRows,
  STATEMENT_WAIT_MS as STATEMENT_WAIT_MS_DEFAULT,
} from "./client.ts";
import { isDatabaseUnavailable } from "./unavailable.ts";

// A statement of the pool waits at a row lock longer than the pool's statement bound: the origin
// gives up on it and drops its connection, but Postgres learns that only once the statement has
// its lock and answers. Until then the abandoned backend stays queued at the lock, taking a
// connection slot of the server; behind a lock held for minutes (a transaction whose origin's link
// died, until the idle bound ends it) each retry of each origin leaves another, and the server
// runs out of connections for every origin. Real Postgres; the test holds the registration
// policy row as such a transaction would. The bound is short here (STATEMENT_WAIT_MS is 30 s).

const STATEMENT_WAIT_MS = 1_500;
/** What a queued registration waits on: issuance.ts takes the policy row first. */
const POLICY_ROW_LOCK = "registration_policy where id = 1 for update";

describe("statements the origin gave up on at a lock (real Postgres)", () => {
  let testDb: TestDatabase;
  let origin: DatabaseHandle;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    origin = connectDatabase({ url: testDb.url, maxConnections: 4, statementWaitMs: STATEMENT_WAIT_MS });
  });
  afterAll(async () => {
    await origin?.close();
    await testDb?.drop();
  });

  it("leave no backend queued at the lock once their bound is past, so a long-held row cannot use up the server's connections", async () => {
    // Mutation: connectDatabase without the server-side statement bound leaves all three backends
    // queued at the lock for as long as the test holds it.
    const db = testDb.handle.db;
    const hold = await holdLock(db, sql.raw(`select 1 from ${POLICY_ROW_LOCK}`));
    const waits = [1, 2, 3].map(() =>
      origin.db
        .transaction(async (tx) => {
          await tx.execute(sql.raw(`select 1 from ${POLICY_ROW_LOCK}`));
        })
        .then(
          () => undefined,
          (error: unknown) => error,
        ),
    );
    await waitUntilBlockedBy(db, {
      holder: hold.pid,
      statement: POLICY_ROW_LOCK,
      what: "the waits",
      count: 3,
    });
    // Each is given up on at the pool's bound, answered as a database unavailable (a 503).
    for (const error of await Promise.all(waits))
      expect(isDatabaseUnavailable(error), String(error)).toBe(true);
    // Postgres ends them soon after, while the row is still held.
    await expect
      .poll(() => blockedBy(db, { holder: hold.pid, statement: POLICY_ROW_LOCK }), {
        timeout: 15_000,
        interval: 250,
      })
      .toBe(0);
    await hold.release();
  }, 60_000);

  it("are ended by Postgres 5 s after the pool's own bound, 35 s unless told otherwise", async () => {
    // The test database's own handle is made with the defaults.
    const [row] = await queryRows<{ bound: string }>(
      testDb.handle.db,
      sql`select current_setting('statement_timeout') as bound`,
    );
    expect(STATEMENT_WAIT_MS_DEFAULT).toBe(30_000);
    expect(row?.bound).toBe("35s");
  });
});
