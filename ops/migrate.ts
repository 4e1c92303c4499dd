/**
 * `npm run migrate`: applies the migrations to DATABASE_URL, or to the embedded Postgres under
 * .data/pg when DATABASE_URL is unset (joining the running stack's cluster, or starting it).
 */
import { loadConfig } from "../origin/config.ts";
import { migrateDatabase } from "../origin/db/migrate.ts";
import { openDatabase } from "../origin/db/open.ts";

const database = await openDatabase(loadConfig(process.env), 1);
try {
  const { applied } = await migrateDatabase(database.db);
  process.stdout.write(
    applied.length === 0 ? "migrate: up to date\n" : `migrate: applied ${applied.length} migration(s)\n`,
  );
} finally {
  await database.close();
}
