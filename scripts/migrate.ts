/**
 * `npm run migrate`: applies the migrations to DATABASE_URL, or to the embedded Postgres under
 * .data/pg when DATABASE_URL is unset (starting and stopping it).
 */
import { loadConfig } from "../origin/config.ts";
import { connectDatabase } from "../origin/db/client.ts";
import { startEmbeddedPostgres } from "../origin/db/embedded.ts";
import { migrateDatabase } from "../origin/db/migrate.ts";

const config = loadConfig(process.env);
const embedded = config.database.url
  ? undefined
  : await startEmbeddedPostgres({ dir: config.database.embedded.dir, port: config.database.embedded.port });
const database = connectDatabase({
  url: config.database.url ?? embedded!.url,
  driver: config.database.driver,
  neonWsProxy: config.database.neonWsProxy,
  maxConnections: 1,
});
try {
  const { applied } = await migrateDatabase(database.db);
  process.stdout.write(
    applied.length === 0 ? "migrate: up to date\n" : `migrate: applied ${applied.length} migration(s)\n`,
  );
} finally {
  await database.close();
  await embedded?.stop();
}
