import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { startWsRelay, type WsRelay } from "../../testing/ws-relay.ts";
import { queryRows } from "../db/client.ts";
import { type AdmitAttemptResult, admitAttempts } from "./admission-repository.ts";

// The persisted per-minute attempt counts (SPEC Limits: 10 per IP group, 120 globally, persisted),
// judged for batches of attempts at once, as several nodes' batches arrive together. Through
// node-postgres and the Neon driver: a batch without room is undone by an error both must report.
describe.each(["pg", "neon"] as const)("admission attempts, counted per batch (%s driver)", (driver) => {
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

  const admit = (minute: Date, ipGroups: string[], limits = { perIpLimit: 10, globalLimit: 120 }) =>
    admitAttempts(testDb.handle.db, { minute, ipGroups, ...limits });
  const rows = async (minute: Date) =>
    Object.fromEntries(
      (
        await queryRows<{ ip_group: string; count: number }>(
          testDb.handle.db,
          sql`select ip_group, count from registration_attempts where minute = ${minute.toISOString()}`,
        )
      ).map((row) => [row.ip_group, row.count]),
    );
  const admitted = (results: AdmitAttemptResult[][]) => results.flat().filter((result) => result.ok).length;

  it("counts every attempt of a batch that has room, in its groups and network-wide", async () => {
    const minute = freshMinute();
    expect(await admit(minute, [A, B, A])).toEqual([{ ok: true }, { ok: true }, { ok: true }]);
    expect(await admit(minute, [A])).toEqual([{ ok: true }]);
    expect(await rows(minute)).toEqual({ [A]: 3, [B]: 1, "*": 4 });
  });

  it("judges a batch that reaches a limit in arrival order: the 11th attempt of a group is refused", async () => {
    const minute = freshMinute();
    await admit(
      minute,
      Array.from({ length: 9 }, () => A),
    );
    expect(await admit(minute, [A, B, A, A])).toEqual([
      { ok: true },
      { ok: true },
      { ok: false, error: "per_ip" },
      { ok: false, error: "per_ip" },
    ]);
    expect(await rows(minute)).toEqual({ [A]: 10, [B]: 1, "*": 11 });
  });

  it("admits exactly the limit of one group when batches of several nodes arrive at once", async () => {
    const minute = freshMinute();
    const results = await Promise.all(Array.from({ length: 6 }, () => admit(minute, [A, A, A])));
    expect(admitted(results)).toBe(10);
    expect(results.flat().filter((result) => !result.ok)).toEqual(
      Array.from({ length: 8 }, () => ({ ok: false, error: "per_ip" })),
    );
    expect(await rows(minute)).toEqual({ [A]: 10, "*": 10 });
  });

  it("admits exactly the global limit when batches of several nodes arrive at once", async () => {
    const minute = freshMinute();
    const limits = { perIpLimit: 10, globalLimit: 5 };
    const results = await Promise.all([
      admit(minute, [A, A, B], limits),
      admit(minute, [B, A], limits),
      admit(minute, [A, B], limits),
      admit(minute, [C], limits),
    ]);
    expect(admitted(results)).toBe(5);
    for (const result of results.flat()) if (!result.ok) expect(result.error).toBe("global");
    const counts = await rows(minute);
    expect(counts["*"]).toBe(5);
    expect((counts[A] ?? 0) + (counts[B] ?? 0) + (counts[C] ?? 0)).toBe(5);
    // A group that comes once the network-wide count is full is refused and leaves no row.
    const D = group("d");
    expect(await admit(minute, [D], limits)).toEqual([{ ok: false, error: "global" }]);
    expect(Object.keys(await rows(minute))).not.toContain(D);
  });
});
