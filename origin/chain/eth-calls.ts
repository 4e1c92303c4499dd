/**
 * The chain calls the origin makes, each with the parser of its result (json-rpc-call.ts sends
 * them). Every call reads at `latest`; the params are as the origin has always sent them.
 */
import type { Hex } from "../../shared/hex.ts";
import type { RpcCall } from "./json-rpc-call.ts";

/** What a mined transaction's receipt says of it. */
export type Receipt = { status: "confirmed" | "reverted"; feeWei: bigint; blockNumber: bigint };

const QUANTITY = /^0x[0-9a-fA-F]{1,64}$/;
const DATA = /^0x[0-9a-fA-F]*$/;

/** A JSON-RPC QUANTITY (0x and 1 to 64 hex digits) as a bigint. */
export function quantity(value: unknown): bigint | undefined {
  return typeof value === "string" && QUANTITY.test(value) ? BigInt(value) : undefined;
}

/** JSON-RPC DATA (0x and hex digits), such as a storage word. */
export function data(value: unknown): Hex | undefined {
  return isData(value) ? value : undefined;
}

function isData(value: unknown): value is Hex {
  return typeof value === "string" && DATA.test(value);
}

/**
 * Any string: what a node answers eth_sendRawTransaction with when it took the bytes. Its shape is
 * not checked: the hash is known before the broadcast, and a result at all is what counts
 * (docs/architecture.md#what-a-broadcast-answer-proves).
 */
export function text(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/**
 * An eth_getTransactionReceipt result: null while the transaction is not mined. A receipt without a
 * status of 0 or 1 or a block number is not read; a gas used or price left out counts as 0. Asked
 * for `txHash`, a receipt naming another transaction is not read either: a batch answer matched by
 * id (json-rpc-call.ts) whose ids a node or balancer garbled would otherwise end an unmined
 * transaction with another's receipt.
 */
export function receipt(value: unknown, txHash?: string): Receipt | null | undefined {
  if (value === null) return null;
  if (typeof value !== "object") return undefined;
  if (txHash !== undefined && "transactionHash" in value && !sameHash(value.transactionHash, txHash))
    return undefined;
  const status = "status" in value ? quantity(value.status) : undefined;
  const blockNumber = "blockNumber" in value ? quantity(value.blockNumber) : undefined;
  const gasUsed = optionalQuantity("gasUsed" in value ? value.gasUsed : undefined);
  const gasPrice = optionalQuantity("effectiveGasPrice" in value ? value.effectiveGasPrice : undefined);
  if ((status !== 0n && status !== 1n) || blockNumber === undefined) return undefined;
  if (gasUsed === undefined || gasPrice === undefined) return undefined;
  return { status: status === 1n ? "confirmed" : "reverted", feeWei: gasUsed * gasPrice, blockNumber };
}

function sameHash(named: unknown, txHash: string): boolean {
  return typeof named === "string" && named.toLowerCase() === txHash.toLowerCase();
}

function optionalQuantity(value: unknown): bigint | undefined {
  return value === undefined || value === null ? 0n : quantity(value);
}

/** The last base fee of an eth_feeHistory result: the next block's. */
export function nextBaseFee(value: unknown): bigint | undefined {
  if (typeof value !== "object" || value === null || !("baseFeePerGas" in value)) return undefined;
  const baseFees = value.baseFeePerGas;
  return Array.isArray(baseFees) ? quantity(baseFees[baseFees.length - 1]) : undefined;
}

// Calls without params are the same every time: one value each.
const BLOCK_NUMBER: RpcCall<bigint> = { method: "eth_blockNumber", params: [], parse: quantity };
const MAX_PRIORITY_FEE: RpcCall<bigint> = { method: "eth_maxPriorityFeePerGas", params: [], parse: quantity };
const FEE_HISTORY: RpcCall<bigint> = {
  method: "eth_feeHistory",
  params: ["0x1", "latest", []],
  parse: nextBaseFee,
};

export function ethBlockNumber(): RpcCall<bigint> {
  return BLOCK_NUMBER;
}

export function ethGetBalance(address: string): RpcCall<bigint> {
  return { method: "eth_getBalance", params: [address, "latest"], parse: quantity };
}

/** The sender's mined nonce at `latest`. */
export function ethGetTransactionCount(address: string): RpcCall<bigint> {
  return { method: "eth_getTransactionCount", params: [address, "latest"], parse: quantity };
}

/** The word at `slot` of `address`'s storage, at `latest`. */
export function ethGetStorageAt(address: string, slot: Hex): RpcCall<Hex> {
  return { method: "eth_getStorageAt", params: [address, slot, "latest"], parse: data };
}

/** The next block's base fee, from the fee history of the latest block. */
export function ethFeeHistoryNextBaseFee(): RpcCall<bigint> {
  return FEE_HISTORY;
}

export function ethMaxPriorityFeePerGas(): RpcCall<bigint> {
  return MAX_PRIORITY_FEE;
}

export function ethGetTransactionReceipt(txHash: string): RpcCall<Receipt | null> {
  return { method: "eth_getTransactionReceipt", params: [txHash], parse: (value) => receipt(value, txHash) };
}

export function ethSendRawTransaction(rawTx: string): RpcCall<string> {
  return { method: "eth_sendRawTransaction", params: [rawTx], parse: text };
}
