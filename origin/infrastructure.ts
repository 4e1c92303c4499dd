import type { BackupStore } from "./backup-store.ts";
import type { ChainClient } from "./chain/client.ts";
import type { JsonRpcUpstream } from "./chain/json-rpc-upstream.ts";
import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import type { DatabaseHandle } from "./db/client.ts";
import type { Logger } from "./logger.ts";
import type { OriginMetrics } from "./metrics/metrics.ts";
import type { BatchHoldingReport } from "./signer/batch-holding.ts";
import type { KeyHoldingReport } from "./signer/key-holding.ts";
import type { PolicyHoldingReport } from "./signer/policy-holding.ts";
import type { SignerClient } from "./signer/types.ts";

/**
 * The clients and services every capability is built on, opened once by whoever starts the
 * origin (main.ts, the test harness, the crash child, the bench), each through the one factory
 * openInfrastructure (open-infrastructure.ts), and handed to composeOrigin (compose.ts); no module
 * reaches for a singleton. It names no capability: a capability imports it, never the other way
 * round. A test that needs a fault the real parts cannot produce names it as an override of that
 * factory (a signer that fails, an upstream that dies after a broadcast) instead of threading a
 * hook through production types.
 */
export type Infrastructure = {
  config: Config;
  database: DatabaseHandle;
  /** Absent when CHAIN_RPC_URL is unset: the origin runs without a chain and /healthz says so. */
  chain: ChainClient | undefined;
  /** Raw JSON-RPC pass-through to the same node (the /rpc proxy, balance reads); absent with no chain. */
  rpc: JsonRpcUpstream | undefined;
  /** The enclave signer: the socket client, or dormant when no endpoint is configured. */
  signer: SignerClient;
  logger: Logger;
  clock: Clock;
  /** Where the key pool writes its batches' encrypted backups (under config.keyPool.backupDir). */
  backupStore: BackupStore;
  /** The metrics registry the signer and the chain upstream are wrapped with (openInfrastructure). */
  metrics: OriginMetrics;
  /**
   * Asks the enclave whether it holds the keys the database assigns (signer/key-holding.ts); absent
   * without an enclave endpoint. The origin refuses to start when a key is missing
   * (startup/keys-held.ts); /healthz reports it.
   */
  keysHeld?: (() => Promise<KeyHoldingReport>) | undefined;
  /**
   * Asks the enclave for one assigned key of every key batch (signer/batch-holding.ts): the start's
   * check, which names each batch a recovery left out; absent without an enclave endpoint.
   */
  batchesHeld?: (() => Promise<BatchHoldingReport>) | undefined;
  /**
   * Asks the enclave whether it holds the spending policies and the freeze the database stores
   * (signer/policy-holding.ts); absent without an enclave endpoint. The start logs a warning when it
   * does not (startup/keys-held.ts); /healthz reports it.
   */
  policiesHeld?: (() => Promise<PolicyHoldingReport>) | undefined;
};
