/**
 * What the outbox reads of its senders on chain: their mined nonces (fillers.ts, decide.ts), and
 * each sender's view before a batch signs for it (outbox.ts senderView).
 */
import { batchResults, isQuantity } from "../chain/json-rpc-results.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { SenderView } from "./intent.ts";

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

/**
 * One JSON-RPC batch: each sender's mined nonce then its balance (nodes run a batch's calls in the
 * order listed; see SenderView). One answer per address, in order; undefined where the chain did
 * not say.
 */
export async function readSenderViews(
  rpc: JsonRpcUpstream,
  addresses: readonly string[],
): Promise<(SenderView | undefined)[]> {
  const unique = [...new Set(addresses)];
  const result = await rpc.send(
    unique.flatMap((address, n) => [
      { jsonrpc: "2.0", id: 2 * n, method: "eth_getTransactionCount", params: [address, "latest"] },
      { jsonrpc: "2.0", id: 2 * n + 1, method: "eth_getBalance", params: [address, "latest"] },
    ]),
  );
  const byId = batchResults(result);
  const views = new Map<string, SenderView | undefined>();
  for (const [n, address] of unique.entries()) {
    const minedNonce = byId.get(2 * n);
    const balanceWei = byId.get(2 * n + 1);
    views.set(
      address,
      isQuantity(minedNonce) && isQuantity(balanceWei)
        ? { minedNonce: BigInt(minedNonce), balanceWei: BigInt(balanceWei) }
        : undefined,
    );
  }
  return addresses.map((address) => views.get(address));
}
