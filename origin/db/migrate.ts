import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import { readMigrationFiles } from "drizzle-orm/migrator";
import { bigint, pgTable, text } from "drizzle-orm/pg-core";
import { errorMessage } from "../../shared/error-message.ts";
import type { Db } from "./client.ts";
import { keepIdsAheadOfRestores, rebaseRestoredEventLog } from "./restored-cluster.ts";

export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../migrations", import.meta.url));

/** Arbitrary constant: serializes migrators started at the same time (two origins, a test run). */
const MIGRATION_LOCK_KEY = 7_700_001;

/** Bookkeeping of the migrator itself; not part of schema.ts so drizzle-kit never generates it. */
const schemaMigrations = pgTable("schema_migrations", {
  hash: text("hash").primaryKey(),
  createdAt: bigint("created_at", { mode: "number" }).notNull(),
});

export type MigrateResult = {
  applied: string[];
  /** Events whose transaction ids came from another cluster (restored-cluster.ts); 0 as a rule. */
  restoredEvents: number;
};

/**
 * A migration Postgres refused (an object in its way, rows its constraint does not admit, a lost
 * connection). Its message names the migration and says the database was left as it was: the
 * pending migrations go in one transaction, so none of them was applied.
 */
export class MigrationFailed extends Error {
  constructor(
    readonly migration: string,
    pending: number,
    cause: unknown,
  ) {
    super(
      `migration ${migration} failed: ${postgresReason(cause)}; none of the ${pending} pending migration(s) was applied, the database is as it was`,
    );
    this.name = "MigrationFailed";
  }
}

/** What Postgres said: drizzle's query error wraps it (and its own message would list the SQL). */
function postgresReason(error: unknown): string {
  const refused =
    error instanceof Error && "query" in error && error.cause !== undefined ? error.cause : error;
  return errorMessage(refused);
}

/** Each migration's tag (`0040_webhook_created_snapshot`) by its journal time, as the journal names it. */
function tagsByTime(folder: string): Map<number, string> {
  const journal = JSON.parse(readFileSync(path.join(folder, "meta", "_journal.json"), "utf8")) as {
    entries: { when: number; tag: string }[];
  };
  return new Map(journal.entries.map((entry) => [entry.when, entry.tag]));
}

/**
 * Applies the drizzle-kit migrations in `migrations/` that are not yet recorded, in one
 * transaction under an advisory lock, so concurrent starts neither race nor half-apply. A node
 * migrates on a connection of its own (DatabaseHandle.unbounded): a pool's statements are bound by
 * STATEMENT_WAIT_MS, and one migration may rebuild a large table, or wait for another node's.
 */
export async function migrateDatabase(db: Db, folder: string = MIGRATIONS_FOLDER): Promise<MigrateResult> {
  const migrations = readMigrationFiles({ migrationsFolder: folder });
  const tags = tagsByTime(folder);
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
    const pending = migrations.filter((migration) => !appliedHashes.has(migration.hash));
    for (const migration of pending) {
      try {
        for (const statement of migration.sql) {
          if (statement.trim() !== "") await tx.execute(sql.raw(statement));
        }
      } catch (error) {
        // Thrown out of the transaction, which rolls back every migration applied before it too.
        const tag = tags.get(migration.folderMillis) ?? String(migration.folderMillis);
        throw new MigrationFailed(tag, pending.length, error);
      }
      await tx.insert(schemaMigrations).values({ hash: migration.hash, createdAt: migration.folderMillis });
      applied.push(String(migration.folderMillis));
    }
    // Both read the schema the project's migrations make; a test's older set stops before that.
    let restoredEvents = 0;
    if (folder === MIGRATIONS_FOLDER) {
      restoredEvents = await rebaseRestoredEventLog(tx as unknown as Db);
      await keepIdsAheadOfRestores(tx as unknown as Db);
    }
    return { applied, restoredEvents };
  });
}
