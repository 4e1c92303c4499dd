import type { BroadcastLane } from "./chain/broadcast-lane.ts";
import type { ChainClient } from "./chain/client.ts";
import type { FeeOracle } from "./chain/fees.ts";
import type { JsonRpcUpstream } from "./chain/json-rpc-upstream.ts";
import type { Config } from "./config.ts";
import type { OriginMetrics } from "./console/metrics.ts";
import type { DatabaseHandle } from "./db/client.ts";
import type { Logger } from "./logger.ts";
import type { KeyHoldingReport } from "./signer/key-holding.ts";
import type { SignerClient } from "./signer/types.ts";
import type { X402Runtime } from "./x402/setup.ts";

export type Clock = { now(): Date };

/**
 * What the money routes need beyond the rest, built once the origin has checked its configuration
 * against the enclave's sealed policy (issue 12 item 5).
 */
export type MoneyRuntime = {
  fees: FeeOracle;
  /** The genesis bridge operator, lowercase: never a recipient (DESIGN §5). */
  operatorPool: string;
  /** The faucet treasury the enclave signs payouts with; absent without a configured treasury. */
  treasury: { address: string; keyRef: string } | undefined;
  /** Called once a transaction is in flight (wakes the transaction tracker). */
  onInFlight: () => void;
  /**
   * The node's one lane for the faucet's and transfers' broadcasts (chain/broadcast-lane.ts):
   * each batch's transactions after the last's, in order. Drained at shutdown.
   */
  broadcasts: BroadcastLane;
  /** The x402 demo and facilitator (x402/setup.ts), when AGENT_X402_ENABLED is on. */
  x402?: X402Runtime | undefined;
};

export const systemClock: Clock = { now: () => new Date() };

/**
 * Everything a handler or worker needs, built once by main.ts (or a test) and passed down;
 * no module reaches for a singleton (STYLE habit 6).
 */
export type AppDeps = {
  config: Config;
  database: DatabaseHandle;
  /** Absent when CHAIN_RPC_URL is unset: the origin runs without a chain and /healthz says so. */
  chain: ChainClient | undefined;
  /** Raw JSON-RPC pass-through to the same node (the /rpc proxy, balance reads); absent with no chain. */
  rpc: JsonRpcUpstream | undefined;
  /** The enclave signer: the socket client, or dormant when no endpoint is configured. */
  signer: SignerClient;
  /** Present when a money switch is on and the configuration matched the sealed policy. */
  money?: MoneyRuntime | undefined;
  logger: Logger;
  clock: Clock;
  /**
   * The metrics registry, when the builder of these deps wrapped the signer and the chain
   * upstream with it (main.ts does); otherwise createApp makes one without those two.
   */
  metrics?: OriginMetrics | undefined;
  /**
   * Asks the enclave whether it holds the keys the database assigns (signer/key-holding.ts); absent
   * without an enclave endpoint. /healthz reports it.
   */
  keysHeld?: (() => Promise<KeyHoldingReport>) | undefined;
};
