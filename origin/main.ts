import { errorMessage } from "../shared/error-message.ts";
import { noArgumentsCommand } from "../shared/no-arguments.ts";
import { onParentExit } from "../shared/node/parent-exit.ts";
import { releaseLog } from "../shared/node/unread-output.ts";
import { composeOrigin } from "./compose.ts";
import { ConfigError, loadConfig } from "./config.ts";
import { createLogger } from "./logger.ts";
import { openInfrastructure } from "./open-infrastructure.ts";
import { startHttpServer } from "./server.ts";
import { inheritedListenFd } from "./socket-activation.ts";
import { ORIGIN_USAGE } from "./usage.ts";

/** The variables whose values are secrets (config.secrets, and the database URL's password). */
const SECRET_VARIABLES = [
  "AGENT_REGISTRATION_IP_SECRET",
  "AGENT_REGISTRATION_ADMIN_SECRET",
  "AGENT_EDGE_SHARED_SECRET",
  "AGENT_ADMIN_API_TOKEN",
  "DATABASE_URL",
] as const;

/** Boot only: config → infrastructure → composeOrigin → serve; clean shutdown on SIGINT/SIGTERM. */
async function main(): Promise<void> {
  const args = noArgumentsCommand(process.argv.slice(2));
  if (args === "help") {
    process.stdout.write(`${ORIGIN_USAGE}\n`);
    return;
  }
  if (args === "refused") {
    process.stderr.write(
      `origin: takes no arguments (it is configured by its environment)\n${ORIGIN_USAGE}\n`,
    );
    process.exit(2);
  }
  let config: ReturnType<typeof loadConfig>;
  let listenFd: number | undefined;
  try {
    config = loadConfig(process.env);
    listenFd = inheritedListenFd(process.env, process.pid);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`origin: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  // sd_listen_fds(3) unsets them too: they are this process's, not its children's (Postgres).
  for (const name of ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"]) delete process.env[name];
  // The secrets are the config's now. A child inherits the environment: the embedded Postgres
  // (which runs as the `postgres` user under root) would hold them in its environment, readable in
  // /proc, for as long as it runs.
  for (const name of SECRET_VARIABLES) delete process.env[name];
  const logger = createLogger(config.logLevel);

  // A SIGINT or SIGTERM before the origin serves is kept until the start reaches a point it can
  // stop from: ended by the signal there and then, the origin left the embedded Postgres it was
  // starting (its child) running, holding the data folder and its port. With DATABASE_URL it has
  // nothing of its own to stop, and the signal ends it at once (a wait at another node's migration
  // lock with it).
  let stopAsked: NodeJS.Signals | undefined;
  let onStop = (signal: NodeJS.Signals): void => {
    stopAsked ??= signal;
  };
  const hearStops = (): void => {
    for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => onStop(signal));
  };
  if (config.database.url === undefined) hearStops();

  const opened = await openInfrastructure(config, logger);
  const stopIfAsked = async (): Promise<void> => {
    if (stopAsked === undefined) return;
    logger.info({ signal: stopAsked }, "shutting down");
    await opened.close();
    logger.info("stopped");
    await releaseLog(logger);
    process.exit(0);
  };
  await stopIfAsked();
  const stopAtStart = async (message: string): Promise<never> => {
    process.stderr.write(`origin: ${message}\n`);
    await opened.close();
    process.exit(1);
  };
  // The start-up checks (the keys the database assigns, the money switches against the sealed
  // policy) refuse the start here.
  const composed = await composeOrigin(opened.infrastructure, { sealed: opened.sealed });
  if (!composed.ok) {
    return stopAtStart(
      composed.error.code === "money"
        ? `the money switches cannot be turned on:\n  - ${composed.error.errors.join("\n  - ")}`
        : composed.error.errors.join("\n"),
    );
  }
  await stopIfAsked();
  const origin = composed.value;
  const app = origin.app;
  const server = await startHttpServer(app, config.http.host, config.http.port, listenFd).catch(
    (error: unknown) => stopAtStart(listenRefusal(error, config.http)),
  );
  if (stopAsked !== undefined) {
    await server.close();
    await stopIfAsked();
  }
  logger.info(
    {
      url: `${server.url}${config.http.basePath}`,
      // At the origin its passkeys are bound to, not the listener's address: a browser makes no
      // passkey at 127.0.0.1.
      console: config.secrets.adminApiToken
        ? `${config.console.origin}${config.http.basePath}/admin/agents`
        : null,
      gateway_enabled: config.gatewayEnabled,
    },
    "origin listening",
  );

  // With the gateway switch off, no background worker starts (composeOrigin's start;
  // docs/api.md#the-switches).
  origin.start();

  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    origin.endStreams();
    await server.close();
    // Each capability drains (transfers answered `signed` leave for the chain) before its workers
    // stop and the clients close.
    await origin.stop();
    await opened.close();
    logger.info("stopped");
    await releaseLog(logger);
    process.exit(0);
  };
  onStop = (signal) => void shutdown(signal);
  if (config.database.url !== undefined) hearStops();
  // Started by the launcher with an IPC channel: if the launcher dies, do not linger as an orphan.
  onParentExit(() => void shutdown("parent-exit"));
}

/**
 * Why the origin could not listen, naming the variable to change: Node's own message names the
 * address alone (`listen EADDRINUSE: address already in use 127.0.0.1:8788`), a second origin on
 * the port included.
 */
function listenRefusal(error: unknown, http: { host: string; port: number }): string {
  const code = error instanceof Error && "code" in error ? String(error.code) : "";
  const address = `${http.host}:${http.port}`;
  switch (code) {
    case "EADDRINUSE":
      return `ORIGIN_PORT: ${address} is in use by another program (another origin?): stop it, or give this origin another ORIGIN_PORT`;
    case "EACCES":
      return `ORIGIN_PORT: ${http.port} is a privileged port this user may not listen on: give the origin a port above 1023 (a proxy in front may serve 80 or 443)`;
    case "EADDRNOTAVAIL":
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `ORIGIN_HOST: ${http.host} is not an address of this machine (${code}): give ORIGIN_HOST one of its addresses or a name that resolves to one`;
    default:
      return errorMessage(error);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`origin: failed to start: ${errorMessage(error)}\n`);
  process.exit(1);
});
