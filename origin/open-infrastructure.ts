import { fileBackupStore } from "./backup-store.ts";
import { createChainClient } from "./chain/client.ts";
import { createJsonRpcUpstream, type JsonRpcUpstream } from "./chain/json-rpc-upstream.ts";
import { type Clock, systemClock } from "./clock.ts";
import type { Config } from "./config.ts";
import type { DatabaseHandle } from "./db/client.ts";
import { migrateDatabase } from "./db/migrate.ts";
import { openDatabase } from "./db/open.ts";
import type { Infrastructure } from "./infrastructure.ts";
import type { Logger } from "./logger.ts";
import { createOriginMetrics, type OriginMetrics } from "./metrics/metrics.ts";
import { type BatchHoldingReport, checkEveryBatchHeld } from "./signer/batch-holding.ts";
import { type CreateSignerClientOptions, createSignerClients } from "./signer/create-signer-client.ts";
import { checkAssignedKeysHeld, type KeyHoldingReport } from "./signer/key-holding.ts";
import { checkStoredPoliciesHeld, type PolicyHoldingReport } from "./signer/policy-holding.ts";
import { logSealedPolicy } from "./signer/sealed-policy.ts";
import type { GetPolicyResult, SignerClient, SignerResult } from "./signer/types.ts";

/** The signer client's timings, when a caller needs other than its defaults. */
export type SignerTimings = Pick<
  CreateSignerClientOptions,
  "requestTimeoutMs" | "slowRequestTimeoutMs" | "connectTimeoutMs" | "backoff"
>;

/**
 * What a caller other than main.ts replaces, each by name; everything else is built from the
 * configuration exactly as main.ts gets it.
 */
export type InfrastructureOverrides = {
  /**
   * A database the caller opened and closes (a test's clone of the migrated template, an inert
   * handle where no route reaches it): used as it is, neither migrated nor closed here.
   */
  database?: DatabaseHandle;
  /** The origin's clock (a test moves its own); the system's by default. */
  clock?: Clock;
  /**
   * The chain upstream the origin uses, given the one built from the configuration: a wrapper with
   * a fault the real node cannot produce (the crash child's kill around a broadcast). The metrics
   * time what this returns, as the origin sees it.
   */
  rpc?: (built: JsonRpcUpstream) => JsonRpcUpstream;
  /**
   * The signer client the origin uses, given the one built from the configuration: a wrapper with
   * a fault the real enclave cannot produce or a count of what reaches it, or a client of the
   * caller's own (through a fault proxy), which the caller closes. The metrics time what this
   * returns; the keys-held check still asks the configured enclave through the built client.
   */
  signer?: (built: SignerClient) => SignerClient;
  /** The signer client's timings (a test that stops its enclave reconnects sooner). */
  signerTimings?: SignerTimings;
  /**
   * False: no CPU, memory and event-loop metrics of the process, which several origins in one
   * test process would each collect.
   */
  processMetrics?: boolean;
};

export type OpenedInfrastructure = {
  infrastructure: Infrastructure & { metrics: OriginMetrics };
  /** The enclave's sealed policy as read (and logged) at start; absent without an endpoint. */
  sealed: SignerResult<GetPolicyResult> | undefined;
  /**
   * Closes what this opened: the clients it built (not a caller's replacement), and the database
   * unless the caller handed it over (an embedded Postgres stops with it).
   */
  close(): Promise<void>;
};

/**
 * The one way the origin's infrastructure is built, for main.ts, the test harness, the crash
 * child and the bench alike: the database (opened from the configuration and migrated, unless
 * handed over), one metrics registry with the enclave and chain clients wrapped so every call is
 * timed, the keys-held check whenever an enclave endpoint is configured, and the enclave's sealed
 * policy, read and logged once. The origin reads that policy; it holds no key that could change it.
 */
export async function openInfrastructure(
  config: Config,
  logger: Logger,
  overrides: InfrastructureOverrides = {},
): Promise<OpenedInfrastructure> {
  const database = overrides.database ?? (await openMigratedDatabase(config, logger));
  const clock = overrides.clock ?? systemClock;

  const metrics = createOriginMetrics({
    db: database.db,
    now: () => clock.now().getTime(),
    processMetrics: overrides.processMetrics ?? true,
  });
  const { rpcUrl, timeoutMs, batchLimit } = config.chain;
  const chain = rpcUrl ? createChainClient({ rpcUrl, timeoutMs }) : undefined;
  const upstream = rpcUrl
    ? createJsonRpcUpstream({ url: rpcUrl, timeoutMs, maxBatchCalls: batchLimit })
    : undefined;
  const rpc = upstream && metrics.observeRpc(overrides.rpc?.(upstream) ?? upstream);
  if (!chain) logger.warn("CHAIN_RPC_URL is not set: running without a chain");

  const signers = createSignerClients({
    endpoint: config.signer.endpoint,
    liveIdentityEnabled: config.features.liveIdentity,
    logger,
    ...overrides.signerTimings,
  });
  const signer = metrics.observeSigner(overrides.signer?.(signers.signer) ?? signers.signer);
  const { keyLookup } = signers;
  const keysHeld = keyLookup
    ? (): Promise<KeyHoldingReport> => checkAssignedKeysHeld(database.db, keyLookup)
    : undefined;
  const batchesHeld = keyLookup
    ? (): Promise<BatchHoldingReport> => checkEveryBatchHeld(database.db, keyLookup)
    : undefined;
  const policiesHeld = config.signer.endpoint
    ? (): Promise<PolicyHoldingReport> => checkStoredPoliciesHeld(database.db, signer)
    : undefined;
  const sealed = config.signer.endpoint ? await logSealedPolicy(signer, logger) : undefined;
  return {
    infrastructure: {
      config,
      database,
      chain,
      rpc,
      signer,
      logger,
      clock,
      backupStore: fileBackupStore,
      metrics,
      keysHeld,
      batchesHeld,
      policiesHeld,
    },
    sealed,
    async close() {
      await signers.signer.close();
      upstream?.close();
      if (!overrides.database) await database.close();
    },
  };
}

async function openMigratedDatabase(config: Config, logger: Logger): Promise<DatabaseHandle> {
  const database = await openDatabase(config);
  // A migration Postgres refuses stops the start: the embedded cluster opened for it stops too,
  // rather than stay behind the exiting origin, holding its data folder and its port.
  const { applied, restoredEvents } = await database
    .unbounded((db) => migrateDatabase(db))
    .catch(async (error: unknown) => {
      await database.close();
      throw error;
    });
  if (restoredEvents > 0) {
    logger.warn(
      { restored_events: restoredEvents },
      "the event log came from another cluster (a logical restore): its transaction ids were moved below this cluster's (docs/operations.md#restoring-the-database)",
    );
  }
  logger.info(
    { driver: database.driver, owns_embedded: database.ownsEmbedded, migrations_applied: applied.length },
    "database ready",
  );
  return database;
}
