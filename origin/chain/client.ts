import { createPublicClient, http, type PublicClient } from "viem";
import { chain77 } from "../../shared/chain.ts";

export type ChainClient = PublicClient;

export type CreateChainClientParams = { rpcUrl: string; timeoutMs: number };

/** viem public client for chain 77; every upstream call has a timeout and no hidden retries. */
export function createChainClient(params: CreateChainClientParams): ChainClient {
  return createPublicClient({
    chain: chain77(params.rpcUrl),
    transport: http(params.rpcUrl, { timeout: params.timeoutMs, retryCount: 0 }),
  }) as ChainClient;
}
