import { createChainClient } from "./chain/client.ts";
import { createJsonRpcUpstream } from "./chain/json-rpc-upstream.ts";
import { systemClock } from "./clock.ts";
import { composeOrigin } from "./compose.ts";
import { ConfigError, loadConfig } from "./config.ts";
import { migrateDatabase } from "./db/migrate.ts";
import { openDatabase } from "./db/open.ts";
import { createLogger } from "./logger.ts";
import { createOriginMetrics } from "./metrics/metrics.ts";
import { startHttpServer } from "./server.ts";
import { createSignerClients } from "./signer/create-signer-client.ts";
import { checkAssignedKeysHeld } from "./signer/key-holding.ts";
import { logSealedPolicy } from "./signer/sealed-policy.ts";
import { inheritedListenFd } from "./socket-activation.ts";

/** Boot only: config → database → infrastructure → composeOrigin → serve; clean shutdown on SIGINT/SIGTERM. */
async function main(): Promise<void> {
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
  const logger = createLogger(config.logLevel);

  const database = await openDatabase(config);
  const { applied } = await migrateDatabase(database.db);
  logger.info(
    { driver: database.driver, owns_embedded: database.ownsEmbedded, migrations_applied: applied.length },
    "database ready",
  );

  // One registry for this origin; the enclave and chain clients are wrapped so every call is timed.
  const metrics = createOriginMetrics({ db: database.db, processMetrics: true });
  const chain = config.chain.rpcUrl
    ? createChainClient({ rpcUrl: config.chain.rpcUrl, timeoutMs: config.chain.timeoutMs })
    : undefined;
  const rpc = config.chain.rpcUrl
    ? metrics.observeRpc(
        createJsonRpcUpstream({ url: config.chain.rpcUrl, timeoutMs: config.chain.timeoutMs }),
      )
    : undefined;
  if (!chain) logger.warn("CHAIN_RPC_URL is not set: running without a chain");

  const signers = createSignerClients({
    endpoint: config.signer.endpoint,
    liveIdentityEnabled: config.features.liveIdentity,
    logger,
  });
  const signer = metrics.observeSigner(signers.signer);
  const { keyLookup } = signers;
  const keysHeld = keyLookup ? () => checkAssignedKeysHeld(database.db, keyLookup) : undefined;
  // The origin reads the enclave's sealed policy; it holds no key that could change it (issue 11).
  const sealed = config.signer.endpoint ? await logSealedPolicy(signer, logger) : undefined;
  const closeClients = async (): Promise<void> => {
    await signer.close();
    rpc?.close();
    await database.close();
  };
  const stopAtStart = async (message: string): Promise<never> => {
    process.stderr.write(`origin: ${message}\n`);
    await closeClients();
    process.exit(1);
  };
  // The start-up checks (the keys the database assigns, the money switches against the sealed
  // policy) refuse the start here.
  const composed = await composeOrigin(
    { config, database, chain, rpc, signer, logger, clock: systemClock, metrics, keysHeld },
    { sealed },
  );
  if (!composed.ok) {
    return stopAtStart(
      composed.check === "money"
        ? `the money switches cannot be turned on:\n  - ${composed.errors.join("\n  - ")}`
        : composed.errors.join("\n"),
    );
  }
  const origin = composed.value;
  const app = origin.app;
  const server = await startHttpServer(app, config.http.host, config.http.port, listenFd).catch(
    (error: unknown) => stopAtStart(error instanceof Error ? error.message : String(error)),
  );
  logger.info(
    {
      url: `${server.url}${config.http.basePath}`,
      console: config.secrets.adminApiToken ? `${server.url}${config.http.basePath}/admin/agents` : null,
      gateway_enabled: config.gatewayEnabled,
    },
    "origin listening",
  );

  // SPEC: with the gateway switch off, no background worker starts (composeOrigin's start).
  origin.start();

  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    await server.close();
    // Each capability drains (transfers answered `signed` leave for the chain) before its workers
    // stop and the clients close.
    await origin.stop();
    await closeClients();
    logger.info("stopped");
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  // Started by the launcher with an IPC channel: if the launcher dies, do not linger as an orphan.
  if (process.send) process.on("disconnect", () => void shutdown("parent-exit"));
}

main().catch((error: unknown) => {
  process.stderr.write(
    `origin: failed to start: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
});
