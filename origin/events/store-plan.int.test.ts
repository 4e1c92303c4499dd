import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { untilEventsServable } from "../../testing/events-horizon.ts";
import { queryRows } from "../db/client.ts";
import { lastEventIdQuery, lastEventIdThrough, readServable, servableQuery } from "./store.ts";

/** The node types of the plan's reads of `events`. */
function scansOfEvents(plan: Record<string, unknown>): string[] {
  const nodes: string[] = [];
  const walk = (node: Record<string, unknown>): void => {
    if (node["Relation Name"] === "events") nodes.push(String(node["Node Type"]));
    for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
  };
  walk(plan);
  return nodes;
}

describe("the event log's reads through its indexes (events/store.ts)", () => {
  let db: TestDatabase;
  const EVENTS = 20_000;
  beforeAll(async () => {
    db = await createTestDatabase();
    // A log with a history: 200 agents' events, written by one transaction (one xid), as a
    // month of them would sit in the table; a sequential read of it is what the index spares.
    await db.handle.db.execute(
      sql`insert into events (agent_id, type, data)
          select ('00000000-0000-4000-8000-' || lpad((n % 200)::text, 12, '0'))::uuid, 'action.confirmed',
                 jsonb_build_object('n', n)
          from generate_series(1, ${EVENTS}) n`,
    );
    await db.handle.db.execute(sql`analyze events`);
    await untilEventsServable(db.handle.db);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("reads every agent's events after a place through an index, not the whole log", async () => {
    const [last] = await queryRows<{ xid: string; id: string }>(
      db.handle.db,
      sql`select xid::text as xid, id::text as id from events order by events.id desc offset 10 limit 1`,
    );
    const after = { xid: BigInt(last!.xid), id: BigInt(last!.id) };
    const params = { agentIds: undefined, after, limit: 500, withData: false };
    const [explained] = await queryRows<{ "QUERY PLAN": { Plan: Record<string, unknown> }[] }>(
      db.handle.db,
      sql`explain (format json) ${servableQuery(params)}`,
    );
    const scans = scansOfEvents(explained!["QUERY PLAN"][0]!.Plan);
    expect(scans).toEqual(["Index Scan"]);
    // And the read itself: the ten events after that place, in order.
    const { events } = await readServable(db.handle.db, params);
    expect(events.map((event) => event.id)).toEqual(
      Array.from({ length: 10 }, (_, n) => after.id + BigInt(n + 1)),
    );
  });

  it("finds where a stream opened from now starts (the agent's last event before it) through an index", async () => {
    const agentId = "00000000-0000-4000-8000-000000000007";
    const [last] = await queryRows<{ xid: string; id: string }>(
      db.handle.db,
      sql`select xid::text as xid, id::text as id from events where agent_id = ${agentId}::uuid
          order by events.id desc offset 3 limit 1`,
    );
    const through = { xid: BigInt(last!.xid), id: BigInt(last!.id) };
    const [explained] = await queryRows<{ "QUERY PLAN": { Plan: Record<string, unknown> }[] }>(
      db.handle.db,
      sql`explain (format json) ${lastEventIdQuery(agentId, through)}`,
    );
    const plan = explained!["QUERY PLAN"][0]!.Plan;
    expect(scansOfEvents(plan)).toEqual([expect.stringMatching(/^Index/)]);
    // The index's order read backwards: no sort of the agent's events.
    expect(JSON.stringify(plan)).not.toContain('"Node Type":"Sort"');
    expect(await lastEventIdThrough(db.handle.db, agentId, through)).toBe(through.id);
    // An agent with no event in the log starts after 0.
    expect(await lastEventIdThrough(db.handle.db, "00000000-0000-4000-8000-999999999999", through)).toBe(0n);
  });
});
