import { type Chain, defineChain } from "viem";
import { CHAIN_ID, NATIVE_SYMBOL } from "./constants.ts";

/**
 * viem's description of chain 77. viem assumes 18 native decimals for gas maths, and on chain
 * the native balance is indeed 18-decimal wei; the 6-decimal unit is an API-level view.
 */
export function chain77(rpcUrl: string): Chain {
  return defineChain({
    id: CHAIN_ID,
    name: "Chain 77",
    nativeCurrency: { name: NATIVE_SYMBOL, symbol: NATIVE_SYMBOL, decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}
