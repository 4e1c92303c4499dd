import type { Config } from "../config.ts";
import { connectDatabase, type DatabaseHandle } from "./client.ts";
import { startEmbeddedPostgres } from "./embedded.ts";

export type OpenedDatabase = DatabaseHandle & {
  /** Whether this process started the embedded cluster (and so stops it in close()). */
  ownsEmbedded: boolean;
};

/**
 * The database of the configuration: DATABASE_URL, or the embedded cluster under
 * EMBEDDED_PG_DIR, joined if another process (the running stack) already owns it.
 */
export async function openDatabase(
  config: Config,
  maxConnections: number = config.database.poolSize,
): Promise<OpenedDatabase> {
  if (config.database.url) {
    const handle = connectDatabase({
      url: config.database.url,
      driver: config.database.driver,
      neonWsProxy: config.database.neonWsProxy,
      maxConnections,
    });
    return { ...handle, ownsEmbedded: false };
  }
  const embedded = await startEmbeddedPostgres({ ...config.database.embedded, joinIfRunning: true });
  const handle = connectDatabase({ url: embedded.url, driver: "pg", maxConnections });
  return {
    ...handle,
    ownsEmbedded: embedded.owned,
    async close() {
      await handle.close();
      if (embedded.owned) await embedded.stop();
    },
  };
}
