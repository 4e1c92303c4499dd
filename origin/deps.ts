import type { ChainClient } from "./chain/client.ts";
import type { JsonRpcUpstream } from "./chain/json-rpc-upstream.ts";
import type { Config } from "./config.ts";
import type { DatabaseHandle } from "./db/client.ts";
import type { Logger } from "./logger.ts";
import type { SignerClient } from "./signer/types.ts";

export type Clock = { now(): Date };

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
  logger: Logger;
  clock: Clock;
};
