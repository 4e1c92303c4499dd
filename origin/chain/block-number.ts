import { ethBlockNumber } from "./eth-calls.ts";
import { sendRpcCall } from "./json-rpc-call.ts";
import type { JsonRpcUpstream } from "./json-rpc-upstream.ts";

export type LatestBlock = { get(): Promise<bigint | null> };

/**
 * The latest block number for /network, read at most once per `maxAgeMs` and shared by
 * concurrent requests, so discovery traffic does not turn into one upstream call per request.
 */
export function createLatestBlock(upstream: JsonRpcUpstream, maxAgeMs = 500, now = Date.now): LatestBlock {
  let cached: { value: bigint; at: number } | undefined;
  let inFlight: Promise<bigint | null> | undefined;
  return {
    get() {
      if (cached && now() - cached.at < maxAgeMs) return Promise.resolve(cached.value);
      inFlight ??= sendRpcCall(upstream, ethBlockNumber())
        .then((result) => {
          if (!result.ok) return null;
          cached = { value: result.value, at: now() };
          return cached.value;
        })
        .finally(() => {
          inFlight = undefined;
        });
      return inFlight;
    },
  };
}
