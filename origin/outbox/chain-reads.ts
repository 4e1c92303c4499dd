/** The chain reads the outbox's followers make about its senders (fillers.ts, decide.ts). */
import { batchResults, isQuantity } from "../chain/json-rpc-results.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";

/** Each sender's mined nonce at `latest`, in one JSON-RPC batch; missing when not answered. */
export async function minedNonces(
  rpc: JsonRpcUpstream,
  senders: readonly string[],
): Promise<Map<string, bigint>> {
  const unique = [...new Set(senders)];
  const nonces = new Map<string, bigint>();
  if (unique.length === 0) return nonces;
  const answer = await rpc.send(
    unique.map((address, id) => ({
      jsonrpc: "2.0",
      id,
      method: "eth_getTransactionCount",
      params: [address, "latest"],
    })),
  );
  const results = batchResults(answer);
  for (const [id, address] of unique.entries()) {
    const value = results.get(id);
    if (isQuantity(value)) nonces.set(address, BigInt(value));
  }
  return nonces;
}
