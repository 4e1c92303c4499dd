/**
 * What verification reads from the chain of a payment: whether the authorization's (from, nonce)
 * is used and the payer's balance, two reads of the latest state per payment. The first is the
 * storage word the precompile's `authorizationState` answers from (authorizationSlot in
 * shared/native-transfer-auth.ts), read with eth_getStorageAt: a node answers it from its state as
 * it does a balance, where the view called with eth_call runs a whole transaction in the node's EVM
 * (on the devnet, behind its chain lock), and the settle batch signs only once these reads are in.
 * Payments read together share one JSON-RPC batch, so a burst costs the origin and the node one
 * round trip rather than one per payment. The settle batch (settle.ts) puts the same reads in its
 * own JSON-RPC batch, beside the settler's nonce.
 */
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../../../shared/constants.ts";
import type { Hex } from "../../../shared/hex.ts";
import { authorizationSlotHex } from "../../../shared/native-transfer-auth.ts";
import { ethGetBalance, ethGetStorageAt } from "../../chain/eth-calls.ts";
import { type RpcBatchResults, type RpcCall, sendRpcBatch } from "../../chain/json-rpc-call.ts";
import type { JsonRpcUpstream } from "../../chain/json-rpc-upstream.ts";
import { createBatcher } from "../../db/batcher.ts";

export type PayerFacts = { nonceUsed: boolean; balanceWei: bigint };

export type PayerFactsQuery = { payer: Hex; nonce: Hex };

/** Undefined when the chain did not answer (or answered something that is not a quantity). */
export type PayerFactsReader = (payer: Hex, nonce: Hex) => Promise<PayerFacts | undefined>;

/** A query's two reads, in this order: the authorization's flag, then the payer's balance. */
export type PayerFactsCalls = readonly [used: RpcCall<Hex>, balance: RpcCall<bigint>];

export function payerFactsCalls({ payer, nonce }: PayerFactsQuery): PayerFactsCalls {
  return [
    ethGetStorageAt(NATIVE_TRANSFER_AUTH_ADDRESS, authorizationSlotHex(payer, nonce)),
    ethGetBalance(payer),
  ];
}

/** A query's facts from its calls' results; undefined unless both answered. */
export function payerFactsOf([used, balance]: RpcBatchResults<PayerFactsCalls>): PayerFacts | undefined {
  if (!used.ok || !balance.ok) return undefined;
  return { nonceUsed: BigInt(used.value === "0x" ? "0x0" : used.value) !== 0n, balanceWei: balance.value };
}

export function createPayerFactsReader(rpc: JsonRpcUpstream): PayerFactsReader {
  const read = createBatcher<PayerFactsQuery, PayerFacts | undefined>(
    async (queries) => (await sendRpcBatch(rpc, queries.map(payerFactsCalls))).map(payerFactsOf),
    { maxBatch: 64, maxInFlight: 2 },
  );
  return (payer, nonce) => read({ payer, nonce });
}
