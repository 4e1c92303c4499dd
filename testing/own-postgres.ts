/**
 * A Postgres cluster owned by one test (embedded, on its own port and folder), migrated, that the
 * test may stop and start again on the same data: for the fault test that takes the database away
 * under load, which must never touch the suite's shared cluster (testing/global-setup.ts).
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { connectDatabase } from "../origin/db/client.ts";
import { type EmbeddedPostgresHandle, startEmbeddedPostgres } from "../origin/db/embedded.ts";
import { migrateDatabase } from "../origin/db/migrate.ts";
import type { TestDatabase } from "./database.ts";
import { freePort } from "./free-port.ts";

export type OwnPostgres = {
  /** The migrated database, shaped like the suite's (drop() stops and removes the cluster). */
  database: TestDatabase;
  /** Stops the server (a fast shutdown: every connection is cut). */
  stop(): Promise<void>;
  /** Starts it again on the same port and data. */
  start(): Promise<void>;
};

export type OwnPostgresOptions = {
  /** Server settings (`-c name=value`), kept across stop and start. */
  settings?: Record<string, string>;
};

export async function startOwnPostgres(options: OwnPostgresOptions = {}): Promise<OwnPostgres> {
  const dir = await mkdtemp(path.join(tmpdir(), "own-pg-"));
  // Under root the cluster runs as the `postgres` user, which must be able to enter the folder.
  await chmod(dir, 0o755);
  const params = {
    dir: path.join(dir, "pg"),
    port: await freePort(),
    database: "agents",
    settings: options.settings,
  };
  let cluster: EmbeddedPostgresHandle | undefined = await startEmbeddedPostgres(params);
  const url = cluster.url;
  const handle = connectDatabase({ url, driver: "pg", maxConnections: 10 });
  await migrateDatabase(handle.db);
  const stop = async (): Promise<void> => {
    await cluster?.stop();
    cluster = undefined;
  };
  return {
    database: {
      url,
      name: params.database,
      handle,
      async drop() {
        await handle.close();
        await stop();
        await rm(dir, { recursive: true, force: true });
      },
    },
    stop,
    async start() {
      cluster ??= await startEmbeddedPostgres(params);
    },
  };
}
