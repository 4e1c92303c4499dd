import { randomBytes } from "node:crypto";
import { readFile, rm } from "node:fs/promises";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { adminQuery, withDatabase } from "../../testing/global-setup.ts";
import { migrationsBefore } from "../../testing/migrations-before.ts";
import { runTool } from "../../testing/run-tool.ts";
import { connectDatabase, type DatabaseHandle, queryRows } from "./client.ts";
import { MIGRATIONS_FOLDER, migrateDatabase } from "./migrate.ts";

// A database one migration behind, where that migration cannot apply: the column it adds is
// already there (added by hand, say, ahead of the upgrade). What the operator runs, `npm run
// migrate`, must say which migration failed and that the database was left as it was.

const FAILING = "0040_webhook_created_snapshot";

/** The migrations from `tag` on: what a database just before it has pending. */
async function pendingFrom(tag: string): Promise<number> {
  const journal = JSON.parse(
    await readFile(path.join(MIGRATIONS_FOLDER, "meta", "_journal.json"), "utf8"),
  ) as {
    entries: { tag: string }[];
  };
  return journal.entries.length - journal.entries.findIndex((entry) => entry.tag === tag);
}

describe("a migration Postgres refuses (npm run migrate on a real database)", () => {
  const adminUrl = inject("pgAdminUrl");
  const name = `agents_migration_${randomBytes(6).toString("hex")}`;
  const url = withDatabase(adminUrl, name);
  let database: DatabaseHandle;
  let before: string;

  beforeAll(async () => {
    await adminQuery(adminUrl, `create database "${name}"`);
    database = connectDatabase({ url, driver: "pg" });
    before = await migrationsBefore(FAILING);
    await migrateDatabase(database.db, before);
  });
  afterAll(async () => {
    await database?.close();
    await adminQuery(adminUrl, `drop database if exists "${name}" with (force)`);
    if (before) await rm(before, { recursive: true, force: true });
  });

  const recorded = async (): Promise<number> =>
    (await queryRows<{ n: number }>(database.db, sql`select count(*)::int as n from schema_migrations`))[0]!
      .n;

  it("names the migration and its reason, applies nothing, and applies it once the obstacle is gone", async () => {
    const migrate = () => runTool("ops/migrate.ts", [], { env: { DATABASE_URL: url, LOG_LEVEL: "silent" } });
    await database.db.execute(sql`alter table webhook_endpoints add column created_snapshot pg_snapshot`);
    const countBefore = await recorded();
    const pending = await pendingFrom(FAILING);

    const refused = await migrate();
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain(
      `migrate: error: migration ${FAILING} failed: column "created_snapshot" of relation "webhook_endpoints" already exists; none of the ${pending} pending migration(s) was applied, the database is as it was`,
    );
    expect(await recorded()).toBe(countBefore);

    await database.db.execute(sql`alter table webhook_endpoints drop column created_snapshot`);
    const done = await migrate();
    expect(done).toMatchObject({ code: 0, stdout: `migrate: applied ${pending} migration(s)\n` });
    expect(await recorded()).toBe(countBefore + pending);
  }, 60_000);
});
