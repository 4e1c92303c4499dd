import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EmbeddedPostgresHandle, startEmbeddedPostgres } from "../../origin/db/embedded.ts";
import { freePort } from "../free-port.ts";
import {
  addStatements,
  describeStatements,
  openStatementMeter,
  PG_STATEMENTS_SETTINGS,
  phaseStatements,
  type StatementMeter,
  statementDelta,
  statementsToShow,
} from "./pg-statements.ts";

describe("BENCH_PG_STATEMENTS: a phase's statements from pg_stat_statements", () => {
  let folder = "";
  let cluster: EmbeddedPostgresHandle | undefined;
  let meter: StatementMeter | undefined;
  let client: pg.Client | undefined;

  beforeAll(async () => {
    folder = await mkdtemp(path.join(tmpdir(), "pg-statements-"));
    await chmod(folder, 0o755);
    cluster = await startEmbeddedPostgres({
      dir: path.join(folder, "pg"),
      port: await freePort(),
      settings: { ...PG_STATEMENTS_SETTINGS },
    });
    meter = await openStatementMeter(cluster.url);
    client = new pg.Client({ connectionString: cluster.url });
    await client.connect();
    await client.query("create table counted (id int primary key, n int not null)");
    await client.query(`create function bump() returns trigger language plpgsql as $$
      begin update counted set n = n + 1 where id = 0; return new; end $$`);
    await client.query("insert into counted values (0, 0)");
    await client.query(
      "create trigger bumped after insert on counted for each row when (new.id > 0) execute function bump()",
    );
  }, 60_000);

  afterAll(async () => {
    await client?.end();
    await meter?.close();
    await cluster?.stop();
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  it("counts only what ran between the two snapshots, nested statements apart, per operation", async () => {
    // Run before the first snapshot: must not be counted in the phase.
    for (let i = 0; i < 5; i++) await client!.query("select n from counted where id = $1", [0]);
    const before = await meter!.snapshot();
    for (let i = 1; i <= 12; i++) await client!.query("insert into counted values ($1, 0)", [i]);
    for (let i = 0; i < 3; i++) await client!.query("select n from counted where id = $1", [0]);
    const delta = statementDelta(before, await meter!.snapshot());

    const insert = delta.find((row) => row.toplevel && row.query.startsWith("insert into counted"));
    expect(insert).toMatchObject({ calls: 12, rows: 12 });
    expect(insert!.walRecords).toBeGreaterThanOrEqual(12);
    const select = delta.find((row) => row.toplevel && row.query.startsWith("select n from counted"));
    expect(select).toMatchObject({ calls: 3, rows: 3 });
    // The trigger's update, run inside each insert, is its own nested row.
    const nested = delta.find((row) => !row.toplevel && row.query.startsWith("update counted"));
    expect(nested).toMatchObject({ calls: 12, rows: 12 });

    // Two rounds of one phase add up by statement.
    const twice = addStatements(delta, delta);
    expect(twice.find((row) => row.toplevel && row.query.startsWith("insert into counted"))?.calls).toBe(24);

    const lines = describeStatements(delta, 12, "insert", 2);
    // Top-level only, and not the meter's own reads: 12 inserts and 3 selects over 12 operations.
    expect(lines[0]).toMatch(/^ {6}top-level statements a insert 1\.250, executing /);
    expect(lines).toHaveLength(4);
    expect(lines[2]).toContain("| 1.000 | ");
  });

  it("sums a named phase's statements over its rounds, and does nothing when off", async () => {
    const phases = await phaseStatements(cluster!.url, 3);
    try {
      for (let round = 0; round < 2; round++) {
        await phases.during("reads", async () => {
          for (let i = 0; i < 4; i++) await client!.query("select id, n from counted where id = $1", [0]);
        });
        // Between the phases: not the phase's.
        await client!.query("select id, n from counted where id = $1", [0]);
      }
      const lines = phases.describe("reads", 8, "read");
      expect(lines[0]).toMatch(/^ {6}top-level statements a read 1\.000, /);
      expect(lines.slice(2)).toEqual([
        expect.stringMatching(/^ {6}[\d.]+ \| 1\.000 \| .*select id, n from counted/),
      ]);
      expect(phases.describe("never run", 8, "read")).toEqual([]);
    } finally {
      await phases.close();
    }
    const off = await phaseStatements(cluster!.url, undefined);
    expect(await off.during("reads", async () => 42)).toBe(42);
    expect(off.describe("reads", 1, "read")).toEqual([]);
    await off.close();
  });

  it("reads BENCH_PG_STATEMENTS as a count, and refuses anything else", () => {
    expect(statementsToShow(undefined)).toBeUndefined();
    expect(statementsToShow("")).toBeUndefined();
    expect(statementsToShow("12")).toBe(12);
    expect(() => statementsToShow("yes")).toThrow(/BENCH_PG_STATEMENTS must be a whole number/);
    expect(() => statementsToShow("0")).toThrow(/whole number/);
  });
});
