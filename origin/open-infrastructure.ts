import { fileBackupStore } from "./backup-store.ts";
import { createChainClient } from "./chain/client.ts";
import { createJsonRpcUpstream } from "./chain/json-rpc-upstream.ts";
import { systemClock } from "./clock.ts";
import type { Config } from "./config.ts";
import { migrateDatabase } from "./db/migrate.ts";
import { openDatabase } from "./db/open.ts";
import type { Infrastructure } from "./infrastructure.ts";
import type { Logger } from "./logger.ts";
import { createOriginMetrics, type OriginMetrics } from "./metrics/metrics.ts";
import { createSignerClients } from "./signer/create-signer-client.ts";
import { checkAssignedKeysHeld } from "./signer/key-holding.ts";
import { logSealedPolicy } from "./signer/sealed-policy.ts";
import type { GetPolicyResult, SignerResult } from "./signer/types.ts";

export type OpenedInfrastructure = {
  infrastructure: Infrastructure & { metrics: OriginMetrics };
  /** The enclave's sealed policy as read (and logged) at start; absent without an endpoint. */
  sealed: SignerResult<GetPolicyResult> | undefined;
  /** Closes the clients and the database (an embedded Postgres stops with it). */
  close(): Promise<void>;
};

/**
 * The production infrastructure main.ts hands to composeOrigin: the database (migrated), one
 * metrics registry with the enclave and chain clients wrapped so every call is timed, and the
 * enclave's sealed policy, read and logged once. The origin reads that policy; it holds no key
 * that could change it.
 */
export async function openInfrastructure(config: Config, logger: Logger): Promise<OpenedInfrastructure> {
  const database = await openDatabase(config);
  const { applied } = await migrateDatabase(database.db);
  logger.info(
    { driver: database.driver, owns_embedded: database.ownsEmbedded, migrations_applied: applied.length },
    "database ready",
  );

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
  const sealed = config.signer.endpoint ? await logSealedPolicy(signer, logger) : undefined;
  return {
    infrastructure: {
      config,
      database,
      chain,
      rpc,
      signer,
      logger,
      clock: systemClock,
      backupStore: fileBackupStore,
      metrics,
      keysHeld,
    },
    sealed,
    async close() {
      await signer.close();
      rpc?.close();
      await database.close();
    },
  };
}
