import { type SQL, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { type Db, queryRows } from "../db/client.ts";
import { readActionPage, readIdentityPage, search } from "./browse-queries.ts";

// The console's lists of actions and identities read a page, newest first, of tables that only
// grow (nothing deletes an action). Each page must read about a page of rows, found through an
// index in the list's order, not every row of the table sorted on each load; a search by an
// idempotency key, the actions that carry it.

const IDENTITIES = 2_000;
const ACTIONS = 30_000;
const LIMIT = 25;

type PlanNode = {
  "Node Type": string;
  "Relation Name"?: string;
  "Actual Rows": number;
  "Actual Loops": number;
  "Rows Removed by Filter"?: number;
  Plans?: PlanNode[];
};

/**
 * Each table the statement read, with how it read it and how many rows that read went through:
 * those it produced and those its filter dropped (a scan's filter drops rows it still read).
 */
function tablesRead(node: PlanNode, into: string[] = []): string[] {
  if (node["Relation Name"]) {
    const rows = (node["Actual Rows"] + (node["Rows Removed by Filter"] ?? 0)) * node["Actual Loops"];
    into.push(`${node["Relation Name"]}: ${node["Node Type"]}, ${rows} rows`);
  }
  for (const child of node.Plans ?? []) tablesRead(child, into);
  return into;
}

/** The statement `read` sends, run under EXPLAIN ANALYZE. */
async function planOf(db: Db, read: (db: Db) => Promise<unknown>): Promise<string[]> {
  let sent: SQL | undefined;
  const capturing = new Proxy(db, {
    get(target, property, receiver) {
      if (property !== "execute") return Reflect.get(target, property, receiver);
      return (query: SQL) => {
        sent = query;
        return target.execute(query);
      };
    },
  });
  await read(capturing);
  if (!sent) throw new Error("the read sent no statement");
  const [row] = await queryRows<{ "QUERY PLAN": [{ Plan: PlanNode }] }>(
    db,
    sql`explain (analyze, format json) ${sent}`,
  );
  return tablesRead(row!["QUERY PLAN"][0].Plan);
}

/** How many rows a table's read produced, from a line of tablesRead. */
const rowsOf = (line: string): number => Number(/, (\d+) rows$/.exec(line)![1]);

describe("the console's action and identity lists on a grown database (real Postgres)", () => {
  let testDb: TestDatabase;

  beforeAll(async () => {
    testDb = await createTestDatabase();
    const { db } = testDb.handle;
    await db.execute(sql`
      insert into agent_identities (assigned_wallet, agent_transfer_key_ref, capabilities, origin, created_at)
      select '0x' || lpad(to_hex(g), 40, '0'), lpad(to_hex(g), 64, '0'), array['read','transfer'], 'operator',
             now() - make_interval(secs => g)
      from generate_series(1, ${IDENTITIES}::int) g`);
    await db.execute(sql`
      insert into agent_actions (agent_id, kind, idempotency_key, request_hash, status, amount_units, created_at, updated_at)
      select i.agent_id, 'transfer', 'key-' || g, 'h', 'confirmed', 1, now() - make_interval(secs => g), now()
      from generate_series(1, ${ACTIONS}::int) g
      join (select agent_id, row_number() over () as n from agent_identities) i on i.n = 1 + g % ${IDENTITIES}::int`);
    await db.execute(sql`analyze agent_identities`);
    await db.execute(sql`analyze agent_actions`);
  }, 120_000);
  afterAll(async () => {
    await testDb?.drop();
  });

  it("reads a page of actions, the first and the next, not the whole table", async () => {
    const { db } = testDb.handle;
    const first = await readActionPage(db, { limit: LIMIT });
    expect(first.items).toHaveLength(LIMIT);
    for (const cursor of [undefined, first.next_cursor!]) {
      const read = await planOf(db, (capturing) => readActionPage(capturing, { limit: LIMIT, cursor }));
      const actions = read.filter((line) => line.startsWith("agent_actions:"));
      expect(actions, read.join("\n")).toHaveLength(1);
      expect(rowsOf(actions[0]!), read.join("\n")).toBeLessThanOrEqual(2 * (LIMIT + 1));
    }
  });

  it("finds the actions of an idempotency key, whatever the agent, without reading the others", async () => {
    const { db } = testDb.handle;
    // The oldest action's key (last of a walk down created_at), and a key no action carries.
    const oldest = `key-${ACTIONS}`;
    expect((await search(db, oldest)).matches).toHaveLength(1);
    for (const key of [oldest, "no-such-key"]) {
      const read = await planOf(db, (capturing) => search(capturing, key));
      const actions = read.filter((line) => line.startsWith("agent_actions:"));
      expect(actions, read.join("\n")).toHaveLength(1);
      expect(rowsOf(actions[0]!), read.join("\n")).toBeLessThanOrEqual(1);
      expect(actions[0], read.join("\n")).not.toContain("Seq Scan");
    }
  });

  it("reads a page of identities, not the whole table", async () => {
    const { db } = testDb.handle;
    const first = await readIdentityPage(db, { limit: LIMIT });
    expect(first.items).toHaveLength(LIMIT);
    for (const cursor of [undefined, first.next_cursor!]) {
      const read = await planOf(db, (capturing) => readIdentityPage(capturing, { limit: LIMIT, cursor }));
      const identities = read.filter((line) => line.startsWith("agent_identities:"));
      expect(identities.length, read.join("\n")).toBeGreaterThan(0);
      for (const line of identities)
        expect(rowsOf(line), read.join("\n")).toBeLessThanOrEqual(2 * (LIMIT + 1));
    }
  });
});
