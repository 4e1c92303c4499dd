/**
 * What verification reads from the chain of a payment: whether the
 * authorization's (from, nonce) is used (`authorizationState` on the precompile) and the payer's
 * balance, two calls per payment. Payments read together share one JSON-RPC batch, so a burst
 * costs the origin and the node one round trip rather than one per payment. The settle batch
 * (settle.ts) puts the same calls in its own JSON-RPC batch, beside the settler's nonce.
 */
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../../shared/constants.ts";
import type { Hex } from "../../shared/hex.ts";
import { authorizationStateCalldata } from "../../shared/native-transfer-auth.ts";
import { batchResults, isQuantity } from "../chain/json-rpc-results.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { createBatcher } from "../db/batcher.ts";

export type PayerFacts = { nonceUsed: boolean; balanceWei: bigint };

export type PayerFactsQuery = { payer: Hex; nonce: Hex };

/** Undefined when the chain did not answer (or answered something that is not a quantity). */
export type PayerFactsReader = (payer: Hex, nonce: Hex) => Promise<PayerFacts | undefined>;

/** The JSON-RPC calls for `queries`, two each, with ids from `firstId` on. */
export function payerFactsCalls(queries: PayerFactsQuery[], firstId: number): object[] {
  return queries.flatMap(({ payer, nonce }, n) => [
    {
      jsonrpc: "2.0",
      id: firstId + 2 * n,
      method: "eth_call",
      params: [
        { to: NATIVE_TRANSFER_AUTH_ADDRESS, data: authorizationStateCalldata(payer, nonce) },
        "latest",
      ],
    },
    { jsonrpc: "2.0", id: firstId + 2 * n + 1, method: "eth_getBalance", params: [payer, "latest"] },
  ]);
}

/** The facts of `count` queries from the answers by id (payerFactsCalls' ids from `firstId`). */
export function payerFactsFrom(
  results: ReadonlyMap<unknown, unknown>,
  count: number,
  firstId: number,
): Array<PayerFacts | undefined> {
  return Array.from({ length: count }, (_, n) => {
    const used = results.get(firstId + 2 * n);
    const balance = results.get(firstId + 2 * n + 1);
    if (typeof used !== "string" || !/^0x[0-9a-fA-F]*$/.test(used)) return undefined;
    if (!isQuantity(balance)) return undefined;
    return { nonceUsed: BigInt(used === "0x" ? "0x0" : used) !== 0n, balanceWei: BigInt(balance) };
  });
}

export function createPayerFactsReader(rpc: JsonRpcUpstream): PayerFactsReader {
  const read = createBatcher<PayerFactsQuery, PayerFacts | undefined>(
    async (queries) =>
      payerFactsFrom(batchResults(await rpc.send(payerFactsCalls(queries, 0))), queries.length, 0),
    { maxBatch: 64, maxInFlight: 2 },
  );
  return (payer, nonce) => read({ payer, nonce });
}
