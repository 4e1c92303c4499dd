import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { queryRows } from "../db/client.ts";
import { grantException, listExceptions, revokeException } from "./exceptions.ts";

// The service behind `npm run funding` (and the console): refusals write nothing.

describe("funding exceptions service", () => {
  let testDb: TestDatabase;
  const wallet = `0x${"ab".repeat(20)}`;
  const rows = async (): Promise<number> => {
    const [row] = await queryRows<{ n: number }>(
      testDb.handle.db,
      sql`select (select count(*) from funding_exceptions) + (select count(*) from funding_exception_changes) as n`,
    );
    return Number(row!.n);
  };

  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb.drop();
  });

  it("refuses a blank reason, a past expiry, a negative ceiling and an unknown id, writing nothing", async () => {
    const db = testDb.handle.db;
    const later = new Date(Date.now() + 3_600_000);
    expect(
      await grantException(db, { wallet, ceilingUnits: 1n, expiresAt: later, reason: "   " }),
    ).toMatchObject({
      ok: false,
      error: { code: "invalid", message: "a reason is required" },
    });
    expect(
      await grantException(db, {
        wallet,
        ceilingUnits: 1n,
        expiresAt: new Date(Date.now() - 1000),
        reason: "r",
      }),
    ).toMatchObject({ ok: false, error: { code: "invalid" } });
    expect(
      await grantException(db, { wallet, ceilingUnits: -1n, expiresAt: later, reason: "r" }),
    ).toMatchObject({
      ok: false,
      error: { code: "invalid" },
    });
    expect(
      await revokeException(db, { id: "00000000-0000-4000-8000-000000000000", reason: "r" }),
    ).toMatchObject({
      ok: false,
      error: { code: "not_found" },
    });
    expect(await rows()).toBe(0);
  });

  it("counts an expired exception as none", async () => {
    const db = testDb.handle.db;
    const granted = await grantException(db, {
      wallet,
      ceilingUnits: 7n,
      expiresAt: new Date(Date.now() + 60_000),
      reason: "r",
    });
    expect(granted.ok).toBe(true);
    expect(await listExceptions(db)).toHaveLength(1);
    expect(await listExceptions(db, {}, new Date(Date.now() + 120_000))).toEqual([]);
  });
});
