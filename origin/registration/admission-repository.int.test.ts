import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { startWsRelay, type WsRelay } from "../../testing/ws-relay.ts";
import { queryRows } from "../db/client.ts";
import { type AdmitAttemptResult, admitAttempt } from "./admission-repository.ts";

// The persisted per-minute attempt counts (10 per IP group, 120 in all:
// docs/api.md#registration-quotas-and-counters), judged one attempt at a time, as several nodes'
// attempts arrive together. Through node-postgres and the Neon driver.
describe.each(["pg", "neon"] as const)("admission attempts, counted one by one (%s driver)", (driver) => {
  let relay: WsRelay | undefined;
  let testDb: TestDatabase;
  let nextMinute = Date.parse("2031-05-06T07:00:00Z");
  /** A minute no other test counted in. */
  const freshMinute = () => {
    nextMinute += 60_000;
    return new Date(nextMinute);
  };
  const group = (name: string) => name.repeat(64).slice(0, 64);
  const A = group("a");
  const B = group("b");
  const C = group("c");

  beforeAll(async () => {
    relay = driver === "neon" ? await startWsRelay() : undefined;
    testDb = await createTestDatabase({ driver, neonWsProxy: relay?.address });
  });
  afterAll(async () => {
    await testDb?.drop();
    await relay?.close();
  });

  const admit = (minute: Date, ipGroup: string, limits = { perIpLimit: 10, globalLimit: 120 }) =>
    admitAttempt(testDb.handle.db, { minute, ipGroup, ...limits });
  /** Each attempt after the one before has been judged. */
  const admitInTurn = async (minute: Date, ipGroups: string[]) => {
    const results: AdmitAttemptResult[] = [];
    for (const ipGroup of ipGroups) results.push(await admit(minute, ipGroup));
    return results;
  };
  const rows = async (minute: Date) =>
    Object.fromEntries(
      (
        await queryRows<{ ip_group: string; count: number }>(
          testDb.handle.db,
          sql`select ip_group, count from registration_attempts where minute = ${minute.toISOString()}`,
        )
      ).map((row) => [row.ip_group, row.count]),
    );
  const admitted = (results: AdmitAttemptResult[]) => results.filter((result) => result.ok).length;

  it("judges attempts in arrival order: the 11th attempt of a group is refused", async () => {
    const minute = freshMinute();
    await admitInTurn(
      minute,
      Array.from({ length: 9 }, () => A),
    );
    expect(await admitInTurn(minute, [A, B, A, A])).toEqual([
      { ok: true },
      { ok: true },
      { ok: false, error: "per_ip" },
      { ok: false, error: "per_ip" },
    ]);
    expect(await rows(minute)).toEqual({ [A]: 10, [B]: 1, "*": 11 });
  });

  it("admits exactly the limit of one group when attempts of several nodes arrive at once", async () => {
    const minute = freshMinute();
    const results = await Promise.all(Array.from({ length: 18 }, () => admit(minute, A)));
    expect(admitted(results)).toBe(10);
    expect(results.filter((result) => !result.ok)).toEqual(
      Array.from({ length: 8 }, () => ({ ok: false, error: "per_ip" })),
    );
    expect(await rows(minute)).toEqual({ [A]: 10, "*": 10 });
  });

  it("admits exactly the global limit when attempts of several nodes arrive at once", async () => {
    const minute = freshMinute();
    const limits = { perIpLimit: 10, globalLimit: 5 };
    const results = await Promise.all([A, A, B, B, A, A, B, C].map((group) => admit(minute, group, limits)));
    expect(admitted(results)).toBe(5);
    for (const result of results) if (!result.ok) expect(result.error).toBe("global");
    const counts = await rows(minute);
    expect(counts["*"]).toBe(5);
    expect((counts[A] ?? 0) + (counts[B] ?? 0) + (counts[C] ?? 0)).toBe(5);
    // A group that comes once the network-wide count is full is refused and leaves no row.
    const D = group("d");
    expect(await admit(minute, D, limits)).toEqual({ ok: false, error: "global" });
    expect(Object.keys(await rows(minute))).not.toContain(D);
  });
});
