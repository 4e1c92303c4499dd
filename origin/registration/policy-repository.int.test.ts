import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { startWsRelay, type WsRelay } from "../../testing/ws-relay.ts";
import { queryRows } from "../db/client.ts";
import { getRegistrationPolicy, updateRegistrationPolicy } from "./policy-repository.ts";

// The same repository suite runs through node-postgres and through the Neon serverless driver
// (WebSocket → relay → the same Postgres), so the production Neon path is exercised for real.
describe.each(["pg", "neon"] as const)("registration policy repository (%s driver)", (driver) => {
  let relay: WsRelay | undefined;
  let testDb: TestDatabase;

  beforeAll(async () => {
    relay = driver === "neon" ? await startWsRelay() : undefined;
    testDb = await createTestDatabase({ driver, neonWsProxy: relay?.address });
    expect(testDb.handle.driver).toBe(driver);
  });
  afterAll(async () => {
    await testDb.drop();
    await relay?.close();
  });

  it("reads the initial, paused policy", async () => {
    const policy = await getRegistrationPolicy(testDb.handle.db);
    expect(policy).toMatchObject({ paused: true, perIpDaily: 3, networkDaily: 100, totalCeiling: 1000 });
    if (relay) expect(relay.connections).toBeGreaterThan(0);
  });

  it("records before, after and reason for each changed setting in one transaction", async () => {
    const { db } = testDb.handle;
    const result = await updateRegistrationPolicy(db, {
      changes: { paused: false, perIpDaily: 5, networkDaily: 100 },
      reason: "open for the beta",
    });
    expect(result.policy).toMatchObject({ paused: false, perIpDaily: 5, networkDaily: 100 });
    expect(result.changed).toEqual([
      { setting: "paused", before: "true", after: "false" },
      { setting: "perIpDaily", before: "3", after: "5" },
    ]);
    const rows = await queryRows(
      db,
      sql`select setting, before_value, after_value, reason from registration_policy_changes order by setting`,
    );
    expect(rows).toEqual([
      { setting: "paused", before_value: "true", after_value: "false", reason: "open for the beta" },
      { setting: "perIpDaily", before_value: "3", after_value: "5", reason: "open for the beta" },
    ]);
  });

  it("rolls the whole change back when the database refuses part of it", async () => {
    const { db } = testDb.handle;
    await expect(
      updateRegistrationPolicy(db, { changes: { paused: true, totalCeiling: -1 }, reason: "bad ceiling" }),
    ).rejects.toThrow();
    const policy = await getRegistrationPolicy(db);
    expect(policy).toMatchObject({ paused: false, totalCeiling: 1000 });
    const rows = await queryRows(db, sql`select count(*)::int as n from registration_policy_changes`);
    expect(rows).toEqual([{ n: 2 }]);
  });

  it("refuses an empty reason", async () => {
    await expect(
      updateRegistrationPolicy(testDb.handle.db, { changes: { paused: true }, reason: "  " }),
    ).rejects.toThrow("a reason is required");
  });

  it("serializes concurrent changes under the row lock", async () => {
    const { db } = testDb.handle;
    await Promise.all(
      [7, 8, 9, 10].map((keyReserve) =>
        updateRegistrationPolicy(db, { changes: { keyReserve }, reason: "race" }),
      ),
    );
    const chain = await queryRows<{ before_value: string; after_value: string }>(
      db,
      sql`select before_value, after_value from registration_policy_changes where setting = 'keyReserve' order by changed_at, id`,
    );
    // Each recorded "before" is the previous recorded "after": no lost update.
    expect(chain[0]!.before_value).toBe("10");
    for (let i = 1; i < chain.length; i++) expect(chain[i]!.before_value).toBe(chain[i - 1]!.after_value);
  });
});
