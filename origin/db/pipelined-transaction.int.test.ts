import { sql } from "drizzle-orm";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { startWsRelay, type WsRelay } from "../../testing/ws-relay.ts";
import { queryRows } from "./client.ts";
import { openPipelinedTransaction } from "./pipelined-transaction.ts";
import { preparedStatement, runPrepared } from "./prepared.ts";

const insertNote = preparedStatement<"body">(
  "test_insert_note",
  sql`insert into pipeline_notes (body) values (${sql.placeholder("body")}) returning id`,
).returns({ id: "int" });
const lockCounter = preparedStatement<never>(
  "test_lock_counter",
  sql`select value from pipeline_counter where id = 1 for update`,
).returns({ value: "int" });
const countNotes = preparedStatement<never>(
  "test_count_notes",
  sql`select count(*)::int as n from pipeline_notes`,
).returns({ n: "int" });
// A constant in the template travels as a parameter of its own with every run.
const notesLike = preparedStatement<"prefix">(
  "test_notes_like",
  sql`select body from pipeline_notes where body like ${sql.placeholder("prefix")} || ${"%"} order by id`,
).returns({ body: "text" });

/** The pool's bound on one statement here: short, so a statement can outlast it. */
const STATEMENT_WAIT_MS = 1_000;

// Both drivers: node-postgres writes the statements back to back (pipeline mode); the Neon driver
// has no pipelining and sends each after the one before, with the same outcomes.
describe.each(["pg", "neon"] as const)(
  "pipelined transactions and named statements (%s driver)",
  (driver) => {
    let relay: WsRelay | undefined;
    let testDb: TestDatabase;

    beforeAll(async () => {
      relay = driver === "neon" ? await startWsRelay() : undefined;
      testDb = await createTestDatabase({
        driver,
        neonWsProxy: relay?.address,
        maxConnections: 2,
        statementWaitMs: STATEMENT_WAIT_MS,
      });
      const { db } = testDb.handle;
      await db.execute(
        sql`create table pipeline_notes (id serial primary key, body text not null check (body <> 'bad'))`,
      );
      await db.execute(sql`create table pipeline_counter (id int primary key, value int not null)`);
    });
    afterAll(async () => {
      await testDb.drop();
      await relay?.close();
    });
    beforeEach(async () => {
      const { db } = testDb.handle;
      await db.execute(sql`truncate pipeline_notes`);
      await db.execute(sql`truncate pipeline_counter`);
      await db.execute(sql`insert into pipeline_counter values (1, 0)`);
    });

    const notes = async (): Promise<string[]> =>
      (
        await queryRows<{ body: string }>(testDb.handle.db, sql`select body from pipeline_notes order by id`)
      ).map((row) => row.body);

    it("bounds a pool's statement, and runs a migration's unbounded on a connection of its own", async () => {
      // Mutation: unbounded() running `work` on the pool fails its statement as the pool's does.
      const slow = sql`select pg_sleep(${(STATEMENT_WAIT_MS * 2) / 1000}) is null as slept`;
      const bounded = await testDb.handle.db.execute(slow).then(
        () => undefined,
        (error: unknown) => error as Error,
      );
      expect(String(bounded?.cause)).toMatch(/query read timeout/i);
      const rows = await testDb.handle.unbounded((db) => queryRows<{ slept: boolean }>(db, slow));
      expect(rows).toEqual([{ slept: false }]);
      expect(await queryRows(testDb.handle.db, sql`select 1 as up`)).toEqual([{ up: 1 }]);
    });

    it("commits statements written back to back, visible to others only after the commit", async () => {
      const tx = await openPipelinedTransaction(testDb.handle.db);
      const first = tx.run(insertNote, { body: "first" });
      const second = tx.run(insertNote, { body: "second" });
      const [[a], [b]] = await Promise.all([first, second]);
      expect(b!.id).toBeGreaterThan(a!.id);
      expect(await notes()).toEqual([]);
      await tx.commit();
      expect(await notes()).toEqual(["first", "second"]);
    });

    it("fails what was written behind a failing statement, and its commit rolls everything back", async () => {
      const tx = await openPipelinedTransaction(testDb.handle.db);
      const before = tx.run(insertNote, { body: "before" });
      const failing = tx.run(insertNote, { body: "bad" });
      const after = tx.run(insertNote, { body: "after" });
      const commit = tx.commit();
      await expect(before).resolves.toHaveLength(1);
      await expect(failing).rejects.toThrow(/check constraint/);
      await expect(after).rejects.toThrow();
      await expect(commit).rejects.toThrow();
      expect(await notes()).toEqual([]);
    });

    it("rolls back and hands the connection back to the pool", async () => {
      // Two connections in the pool: three transactions in a row need each one returned.
      for (const body of ["one", "two", "three"]) {
        const tx = await openPipelinedTransaction(testDb.handle.db);
        await tx.run(insertNote, { body });
        await tx.rollback();
      }
      expect(await notes()).toEqual([]);
    });

    it("reads, after a lock it waited for, what the lock's holder committed", async () => {
      // The money executor's order: the lock statement, then (written at once behind it) the read
      // of the facts, which must see everything committed by whoever held the lock before.
      const holder = await openPipelinedTransaction(testDb.handle.db);
      const waiter = await openPipelinedTransaction(testDb.handle.db);
      try {
        await holder.run(lockCounter, {});
        await holder.run(insertNote, { body: "by the holder" });
        const locked = waiter.run(lockCounter, {});
        const counted = waiter.run(countNotes, {});
        await sleep(100);
        await holder.commit();
        await locked;
        expect(await counted).toEqual([{ n: 1 }]);
        await waiter.commit();
      } finally {
        // After a failed expectation, so the other tests get their connections (a no-op otherwise).
        await holder.rollback();
        await waiter.rollback();
      }
    });

    it("runs one named statement on every connection of the pool, constants included", async () => {
      const { db } = testDb.handle;
      await runPrepared(db, insertNote, { body: "apple" });
      await runPrepared(db, insertNote, { body: "apricot" });
      await runPrepared(db, insertNote, { body: "banana" });
      // Concurrent runs take both connections; each prepares the statement on its own.
      const found = await Promise.all(
        Array.from({ length: 6 }, () => runPrepared(db, notesLike, { prefix: "ap" })),
      );
      for (const rows of found) expect(rows.map((row) => row.body)).toEqual(["apple", "apricot"]);
    });

    it("plans named statements once per connection", async () => {
      const [row] = await queryRows<{ plan_cache_mode: string }>(testDb.handle.db, sql`show plan_cache_mode`);
      expect(row?.plan_cache_mode).toBe("force_generic_plan");
    });
  },
);
