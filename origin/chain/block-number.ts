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
      inFlight ??= upstream
        .send({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })
        .then((result) => {
          const hex = result.ok ? (result.value as { result?: unknown }).result : undefined;
          if (typeof hex !== "string" || !/^0x[0-9a-f]+$/i.test(hex)) return null;
          cached = { value: BigInt(hex), at: now() };
          return cached.value;
        })
        .finally(() => {
          inFlight = undefined;
        });
      return inFlight;
    },
  };
}
