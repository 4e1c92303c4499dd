/**
 * What the outbox reads of its senders on chain: their mined nonces (fillers.ts, decide.ts), and
 * each sender's view before a batch signs for it (outbox.ts senderView).
 */
import { ethGetBalance, ethGetTransactionCount } from "../chain/eth-calls.ts";
import { sendRpcBatch } from "../chain/json-rpc-call.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import type { SenderView } from "./intent.ts";

/** Each sender's mined nonce at `latest`, in one JSON-RPC batch; missing when not answered. */
export async function minedNonces(
  rpc: JsonRpcUpstream,
  senders: readonly string[],
): Promise<Map<string, bigint>> {
  const unique = [...new Set(senders)];
  const nonces = new Map<string, bigint>();
  const results = await sendRpcBatch(
    rpc,
    unique.map((address) => ethGetTransactionCount(address)),
  );
  for (const [n, result] of results.entries()) {
    if (result.ok) nonces.set(unique[n]!, result.value);
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
  const results = await sendRpcBatch(
    rpc,
    unique.map((address) => [ethGetTransactionCount(address), ethGetBalance(address)] as const),
  );
  const views = new Map<string, SenderView | undefined>();
  for (const [n, [minedNonce, balanceWei]] of results.entries()) {
    views.set(
      unique[n]!,
      minedNonce.ok && balanceWei.ok
        ? { minedNonce: minedNonce.value, balanceWei: balanceWei.value }
        : undefined,
    );
  }
  return addresses.map((address) => views.get(address));
}
