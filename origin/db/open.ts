import path from "node:path";
import type { Config } from "../config.ts";
import { connectDatabase, type DatabaseHandle } from "./client.ts";
import { portAnswers, runningPostmaster, startEmbeddedPostgres } from "./embedded.ts";

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
      transactionIdleMs: config.database.idleInTransactionMs,
    });
    return { ...handle, ownsEmbedded: false };
  }
  await refuseAPortAnotherProgramHolds(config.database.embedded);
  const embedded = await startEmbeddedPostgres({ ...config.database.embedded, joinIfRunning: true });
  const handle = connectDatabase({
    url: embedded.url,
    driver: "pg",
    maxConnections,
    transactionIdleMs: config.database.idleInTransactionMs,
  });
  return {
    ...handle,
    ownsEmbedded: embedded.owned,
    async close() {
      await handle.close();
      if (embedded.owned) await embedded.stop();
    },
  };
}

/**
 * Stops before initdb when the cluster's folder has no server running and its port answers: a
 * stack on another data folder (START_DATA_DIR) or another program holds it. Postgres itself
 * would only say "Address already in use … wait a few seconds and retry", after initialising a
 * cluster nobody asked for in the folder; this names the variables that point the tool right.
 */
async function refuseAPortAnotherProgramHolds(embedded: { dir: string; port: number }): Promise<void> {
  const dir = path.resolve(embedded.dir);
  if ((await runningPostmaster(dir)) !== undefined) return;
  if (!(await portAnswers(embedded.port))) return;
  throw new Error(
    `port ${embedded.port} (EMBEDDED_PG_PORT) is in use by another program, and no embedded Postgres runs on ${dir} (EMBEDDED_PG_DIR): ` +
      "for a stack started on another data folder, point the tool at that folder's cluster with " +
      "EMBEDDED_PG_DIR=<its data folder>/pg; else give this one a free port with EMBEDDED_PG_PORT, or set DATABASE_URL",
  );
}
