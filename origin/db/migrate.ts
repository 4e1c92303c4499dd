import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { readMigrationFiles } from "drizzle-orm/migrator";
import { bigint, pgTable, text } from "drizzle-orm/pg-core";
import type { Db } from "./client.ts";

export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../migrations", import.meta.url));

/** Arbitrary constant: serializes migrators started at the same time (two origins, a test run). */
const MIGRATION_LOCK_KEY = 7_700_001;

/** Bookkeeping of the migrator itself; not part of schema.ts so drizzle-kit never generates it. */
const schemaMigrations = pgTable("schema_migrations", {
  hash: text("hash").primaryKey(),
  createdAt: bigint("created_at", { mode: "number" }).notNull(),
});

export type MigrateResult = { applied: string[] };

/**
 * Applies the drizzle-kit migrations in `migrations/` that are not yet recorded, in one
 * transaction under an advisory lock, so concurrent starts neither race nor half-apply.
 */
export async function migrateDatabase(db: Db, folder: string = MIGRATIONS_FOLDER): Promise<MigrateResult> {
  const migrations = readMigrationFiles({ migrationsFolder: folder });
  return db.transaction(async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`);
    await tx.execute(sql`
      create table if not exists schema_migrations (
        hash text primary key,
        created_at bigint not null,
        applied_at timestamptz not null default now()
      )`);
    const done = await tx.select({ hash: schemaMigrations.hash }).from(schemaMigrations);
    const appliedHashes = new Set(done.map((row) => row.hash));
    const applied: string[] = [];
    for (const migration of migrations) {
      if (appliedHashes.has(migration.hash)) continue;
      for (const statement of migration.sql) {
        if (statement.trim() !== "") await tx.execute(sql.raw(statement));
      }
      await tx.insert(schemaMigrations).values({ hash: migration.hash, createdAt: migration.folderMillis });
      applied.push(String(migration.folderMillis));
    }
    return { applied };
  });
}
