import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { holdLock } from "../../testing/held-lock.ts";
import { useDatabasesBefore } from "../../testing/migrations-before.ts";
import { startTestOrigin } from "../../testing/origin.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
import { type Db, queryRows } from "../db/client.ts";
import { migrateDatabase } from "../db/migrate.ts";
import {
  foldStateCounts,
  readStateCounts,
  STATE_COUNTS_FOLD_LOCK,
  type StateCounts,
} from "./state-counts.ts";

const hex = (bytes: number): string => `0x${randomBytes(bytes).toString("hex")}`;

/** The counts as the reads made them before the triggers kept them: every row, counted now. */
async function countedNow(db: Db): Promise<Omit<StateCounts, "findings" | "budgets">> {
  const rows = await queryRows<{ family: string; a: string; b: string | null; n: number; m: number | null }>(
    db,
    sql`select 'keys' as family, status as a, null::text as b, count(*)::int as n, null::int as m
          from key_pool group by status
        union all
        select 'batches', status, null, count(*)::int, sum(size)::int from key_batches group by status
        union all
        select 'actions', kind, status, count(*)::int, null from agent_actions group by kind, status
        union all
        select 'settlements', status, null, count(*)::int, null from x402_settlements group by status
        order by 1, 2, 3`,
  );
  const of = (family: string) => rows.filter((row) => row.family === family);
  return {
    keys: of("keys").map((row) => ({ state: row.a, count: row.n })),
    batches: of("batches").map((row) => ({ state: row.a, count: row.n, keys: row.m ?? 0 })),
    actions: of("actions").map((row) => ({ kind: row.a, state: row.b ?? "", count: row.n })),
    settlements: of("settlements").map((row) => ({ state: row.a, count: row.n })),
  };
}

async function kept(db: Db): Promise<Omit<StateCounts, "findings" | "budgets">> {
  const { findings: _findings, budgets: _budgets, ...counts } = await readStateCounts(db);
  return counts;
}

async function changesLeft(db: Db): Promise<number> {
  const [row] = await queryRows<{ n: number }>(db, sql`select count(*)::int as n from state_count_changes`);
  return row!.n;
}

describe("the counts by state the triggers keep (migration 0032)", () => {
  let testDb: TestDatabase;
  const db = (): Db => testDb.handle.db;
  let agents: string[] = [];

  beforeAll(async () => {
    testDb = await createTestDatabase({ maxConnections: 10 });
    await seedFreeKeys(db(), 40);
    agents = [];
    for (let i = 0; i < 6; i++) {
      const made = await provisionedIdentity(db(), { capabilities: ["read"], origin: "operator" });
      agents.push(made.agentId);
    }
  });
  afterAll(async () => {
    await testDb.drop();
  });

  const insertActions = (tx: Db, agentId: string, count: number, kind = "transfer") =>
    tx.execute(
      sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address)
          select ${agentId}::uuid, ${kind}, 'k-' || gen_random_uuid(), 'test', 1, '0x00000000000000000000000000000000000000aa'
          from generate_series(1, ${count})`,
    );

  it("agrees with counting every row after inserts, status changes, updates that change no status and deletes, folded or not", async () => {
    await insertActions(db(), agents[0]!, 5);
    await insertActions(db(), agents[1]!, 3, "faucet");
    // One statement moving some actions between states and leaving others where they were.
    await db().execute(
      sql`update agent_actions set status = case when kind = 'faucet' then 'signed' else status end,
            updated_at = now()
          where agent_id = any(${`{${agents[0]},${agents[1]}}`}::uuid[])`,
    );
    // An update that changes no state appends nothing.
    const before = await changesLeft(db());
    await db().execute(sql`update agent_actions set updated_at = now() where agent_id = ${agents[0]}::uuid`);
    expect(await changesLeft(db())).toBe(before);
    await db().execute(
      sql`delete from agent_actions where action_id in (
            select action_id from agent_actions where agent_id = ${agents[0]}::uuid limit 2)`,
    );
    // Settlements: inserted, moved, one deleted (a claim released).
    for (const status of ["claimed", "claimed", "submitted"]) {
      await db().execute(
        sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
              valid_after, valid_before, signature, status)
            values (${hex(20)}, ${hex(32)}, ${hex(20)}, 1, '', '', 0, 1, '0x', ${status})`,
      );
    }
    await db().execute(sql`update x402_settlements set status = 'settled' where status = 'submitted'`);
    await db().execute(
      sql`delete from x402_settlements where id in (select id from x402_settlements where status = 'claimed' limit 1)`,
    );
    // Keys: assigned by the provisioning above; one quarantined, batches moved.
    await db().execute(
      sql`update key_pool set status = 'quarantined' where key_ref in (
            select key_ref from key_pool where status = 'free' limit 1)`,
    );

    const expected = await countedNow(db());
    expect(expected.actions.length).toBeGreaterThan(1);
    expect(expected.keys.map((row) => row.state)).toEqual(["assigned", "free", "quarantined"]);
    expect(await kept(db())).toEqual(expected);
    expect(await changesLeft(db())).toBeGreaterThan(0);
    expect(await foldStateCounts(db())).toBeGreaterThan(0);
    expect(await changesLeft(db())).toBe(0);
    expect(await kept(db())).toEqual(expected);
  });

  it("stays exact while 8 writers commit and roll back beside folds that run throughout", async () => {
    let writing = true;
    let folds = 0;
    const folder = (async () => {
      while (writing) {
        if ((await foldStateCounts(db())) !== null) folds++;
      }
    })();
    await Promise.all(
      Array.from({ length: 8 }, async (_, writer) => {
        for (let round = 0; round < 15; round++) {
          const rollBack = round % 4 === 3;
          await db()
            .transaction(async (tx) => {
              const t = tx as unknown as Db;
              const agentId = agents[writer % agents.length]!;
              await insertActions(t, agentId, 1 + (round % 3));
              await t.execute(
                sql`update agent_actions set status = ${round % 2 === 0 ? "signed" : "failed"}
                    where action_id in (select action_id from agent_actions
                      where agent_id = ${agentId}::uuid and status = 'requested' limit 1)`,
              );
              if (rollBack) throw new Error("rolled back");
            })
            .catch((error: unknown) => {
              if ((error as Error).message !== "rolled back") throw error;
            });
        }
      }),
    );
    writing = false;
    await folder;
    expect(folds).toBeGreaterThan(1);
    const expected = await countedNow(db());
    expect(await kept(db())).toEqual(expected);
    await foldStateCounts(db());
    expect(await kept(db())).toEqual(expected);
  });

  it("one fold at a time: a fold while another holds its turn skips and moves nothing", async () => {
    await insertActions(db(), agents[2]!, 2);
    const left = await changesLeft(db());
    expect(left).toBeGreaterThan(0);
    const turn = await holdLock(db(), sql`select pg_advisory_xact_lock(${STATE_COUNTS_FOLD_LOCK})`);
    expect(await foldStateCounts(db())).toBeNull();
    expect(await changesLeft(db())).toBe(left);
    await turn.release();
    expect(await foldStateCounts(db())).toBe(left);
  });

  it("an origin's console worker folds the changes within its period", async () => {
    await insertActions(db(), agents[4]!, 3);
    expect(await changesLeft(db())).toBeGreaterThan(0);
    const origin = await startTestOrigin({ database: testDb.handle, workers: ["console"] });
    try {
      await expect.poll(() => changesLeft(db()), { timeout: 15_000, interval: 200 }).toBe(0);
    } finally {
      await origin.close();
    }
    expect(await kept(db())).toEqual(await countedNow(db()));
  });

  it("counts nothing of a table emptied by truncate", async () => {
    await db().execute(sql`truncate agent_actions cascade`);
    const counts = await kept(db());
    expect(counts.actions).toEqual([]);
    expect(counts).toEqual(await countedNow(db()));
    await insertActions(db(), agents[3]!, 2);
    expect((await kept(db())).actions).toEqual([{ kind: "transfer", state: "requested", count: 2 }]);
  });
});

describe("migration 0032 (the counts by state)", () => {
  const { databases, migrationsBefore } = useDatabasesBefore("0032_state_counts");

  it("counts the rows the tables already hold, by state", async () => {
    const { db } = databases[0]!;
    await migrateDatabase(db, migrationsBefore());
    await seedFreeKeys(db, 5);
    const made = await provisionedIdentity(db, { capabilities: ["read"], origin: "operator" });
    await db.execute(
      sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address, status)
          select ${made.agentId}::uuid, kind, 'k-' || status || n, 'test', 1, '0x00000000000000000000000000000000000000aa', status
          from (values ('transfer', 'confirmed'), ('transfer', 'failed'), ('faucet', 'confirmed')) v(kind, status),
            generate_series(1, 3) n`,
    );
    await db.execute(
      sql`insert into x402_settlements (payer, nonce, pay_to, amount_units, requirement_hash, payload_hash,
            valid_after, valid_before, signature, status)
          select ${hex(20)}, '0x' || lpad(to_hex(n), 64, '0'), ${hex(20)}, 1, '', '', 0, 1, '0x', 'failed'
          from generate_series(1, 4) n`,
    );
    const expected = await countedNow(db);

    await migrateDatabase(db);

    expect(expected.actions).toEqual([
      { kind: "faucet", state: "confirmed", count: 3 },
      { kind: "transfer", state: "confirmed", count: 3 },
      { kind: "transfer", state: "failed", count: 3 },
    ]);
    expect(await kept(db)).toEqual(expected);
    expect(await changesLeft(db)).toBe(0);
  });
});
