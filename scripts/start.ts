/**
 * `npm start`: the whole stack on one machine with embedded defaults (DESIGN §3), in order:
 * embedded Postgres, migrations, the origin. Ctrl-C stops every part, last started first.
 *
 * Environment: START_DATA_DIR (default .data), ORIGIN_PORT (8788), EMBEDDED_PG_PORT (54320).
 */
import path from "node:path";
import { connectDatabase } from "../origin/db/client.ts";
import { startEmbeddedPostgres } from "../origin/db/embedded.ts";
import { migrateDatabase } from "../origin/db/migrate.ts";
import { loadOrCreateLocalSecrets } from "./lib/local-secrets.ts";
import { httpOk, type ManagedChild, startChild, waitUntilReady } from "./lib/supervisor.ts";

const dataDir = path.resolve(process.env.START_DATA_DIR ?? ".data");
const originPort = Number(process.env.ORIGIN_PORT ?? 8788);
const pgPort = Number(process.env.EMBEDDED_PG_PORT ?? 54320);
const basePath = process.env.BASE_PATH ?? "/77";

const say = (line: string): void => {
  process.stdout.write(`[start] ${line}\n`);
};

async function main(): Promise<void> {
  const started = Date.now();
  const children: ManagedChild[] = [];
  let stopping = false;

  say(`data folder ${dataDir}`);
  const postgres = await startEmbeddedPostgres({ dir: path.join(dataDir, "pg"), port: pgPort });
  say(`postgres   ready on 127.0.0.1:${pgPort}`);

  const stopAll = async (code: number): Promise<never> => {
    if (!stopping) {
      stopping = true;
      say("stopping…");
      for (const child of [...children].reverse()) {
        await child.stop();
        say(`${child.name} stopped`);
      }
      await postgres.stop().catch(() => {});
      say("postgres stopped");
    }
    process.exit(code);
  };
  process.on("SIGINT", () => void stopAll(0));
  process.on("SIGTERM", () => void stopAll(0));

  try {
    const database = connectDatabase({ url: postgres.url, driver: "pg", maxConnections: 1 });
    const { applied } = await migrateDatabase(database.db);
    await database.close();
    say(`migrations ${applied.length} applied`);

    const secrets = await loadOrCreateLocalSecrets(dataDir);
    const originEnv: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: postgres.url,
      ORIGIN_PORT: String(originPort),
      BASE_PATH: basePath,
      AGENT_GATEWAY_ENABLED: "true",
      AGENT_REGISTRATION_IP_SECRET: secrets.registrationIpSecret,
      AGENT_REGISTRATION_ADMIN_SECRET: secrets.registrationAdminSecret,
      AGENT_EDGE_SHARED_SECRET: secrets.edgeSharedSecret,
      AGENT_ADMIN_API_TOKEN: secrets.adminApiToken,
      BACKUP_DIR: path.join(dataDir, "backups"),
    };
    const origin = startChild({ name: "origin", entry: "origin/main.ts", env: originEnv });
    children.push(origin);
    watchForCrash(origin, () => stopping, stopAll);
    await waitUntilReady(origin, () => httpOk(`http://127.0.0.1:${originPort}${basePath}/healthz`));

    say(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    say(`origin     http://127.0.0.1:${originPort}${basePath}`);
    say(`health     http://127.0.0.1:${originPort}${basePath}/healthz`);
    say(`gateway    http://127.0.0.1:${originPort}${basePath}/agent/v1/network`);
    say(`secrets    ${path.join(dataDir, "local-secrets.json")} (console tokens; never printed)`);
    say("Ctrl-C stops everything");
  } catch (error) {
    say(`failed: ${error instanceof Error ? error.message : String(error)}`);
    await stopAll(1);
  }
}

function watchForCrash(
  child: ManagedChild,
  isStopping: () => boolean,
  stopAll: (code: number) => Promise<never>,
): void {
  void child.exited.then((code) => {
    if (isStopping()) return;
    say(`${child.name} exited unexpectedly (${code}); stopping the stack`);
    void stopAll(1);
  });
}

void main();
