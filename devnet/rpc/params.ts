/**
 * Parameter parsing at the JSON-RPC boundary: every malformed argument is a -32602 naming its
 * position, as geth reports "invalid argument 0: …". Inside, handlers get typed values.
 */
import type { AccessListBytes } from "@ethereumjs/tx";
import { type Address, createAddressFromString, equalsBytes, hexToBytes } from "@ethereumjs/util";
import type { CallRequest } from "../chain/simulate.ts";
import type { Hex } from "../hex.ts";
import { RPC_ERROR_CODES, RpcError } from "./json-rpc.ts";

export type BlockTag =
  /** `pending`: "pending" was asked for (state reads then wait for the transactions sent before). */
  | { kind: "latest"; pending?: true }
  | { kind: "earliest" }
  | { kind: "number"; number: bigint }
  | { kind: "hash"; hash: Hex };

export type LogFilterParams = {
  fromBlock: BlockTag;
  toBlock: BlockTag;
  blockHash: Hex | undefined;
  addresses: Set<string> | undefined;
  topics: Array<Set<string> | null>;
};

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const HASH = /^0x[0-9a-fA-F]{64}$/;
const QUANTITY = /^0x[0-9a-fA-F]+$/;
const DATA = /^0x([0-9a-fA-F]{2})*$/;

export function invalidArgument(index: number, message: string): RpcError {
  return new RpcError(RPC_ERROR_CODES.invalidParams, `invalid argument ${index}: ${message}`);
}

export function requireArguments(params: readonly unknown[], required: number, max = required): void {
  if (params.length < required) {
    throw new RpcError(RPC_ERROR_CODES.invalidParams, `missing value for required argument ${params.length}`);
  }
  if (params.length > max) {
    throw new RpcError(RPC_ERROR_CODES.invalidParams, `too many arguments, want at most ${max}`);
  }
}

export function parseAddress(value: unknown, index: number): Address {
  if (typeof value !== "string" || !ADDRESS.test(value))
    throw invalidArgument(index, "not a 20-byte hex address");
  return createAddressFromString(value.toLowerCase());
}

/** A QUANTITY; a non-negative safe integer is accepted too, as several clients send one. */
export function parseQuantity(value: unknown, index: number): bigint {
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  if (typeof value !== "string" || !QUANTITY.test(value) || value.length > 66) {
    throw invalidArgument(index, "not a hex quantity");
  }
  return BigInt(value);
}

export function parseBytes(value: unknown, index: number): Uint8Array {
  if (typeof value !== "string" || !DATA.test(value)) throw invalidArgument(index, "not hex data");
  return hexToBytes(value as Hex);
}

export function parseHash(value: unknown, index: number): Hex {
  if (typeof value !== "string" || !HASH.test(value)) throw invalidArgument(index, "not a 32-byte hex hash");
  return value.toLowerCase() as Hex;
}

export function parseBoolean(value: unknown, index: number): boolean {
  if (typeof value !== "boolean") throw invalidArgument(index, "not a boolean");
  return value;
}

/**
 * A block tag, number, or EIP-1898 object. Finality is immediate: "safe" and "finalized" mean the
 * latest block, and so does "pending" for blocks; a state read at "pending" waits until the
 * transactions sent before it are mined, so nothing is left pending for it to see (a nonce read
 * there counts every transaction sent). Omitted = latest.
 */
export function parseBlockTag(value: unknown, index: number): BlockTag {
  if (value === undefined || value === null) return { kind: "latest" };
  if (typeof value === "string") {
    switch (value) {
      case "pending":
        return { kind: "latest", pending: true };
      case "latest":
      case "safe":
      case "finalized":
        return { kind: "latest" };
      case "earliest":
        return { kind: "earliest" };
    }
    return { kind: "number", number: parseQuantity(value, index) };
  }
  if (typeof value === "number") return { kind: "number", number: parseQuantity(value, index) };
  if (typeof value === "object") {
    const spec = value as Record<string, unknown>;
    if (spec.blockHash !== undefined) return { kind: "hash", hash: parseHash(spec.blockHash, index) };
    if (spec.blockNumber !== undefined) return parseBlockTag(spec.blockNumber, index);
  }
  throw invalidArgument(index, "not a block number, tag or hash");
}

/** The transaction object of eth_call and eth_estimateGas. */
export function parseCallRequest(value: unknown, index: number): CallRequest {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalidArgument(index, "not a transaction call object");
  }
  const call = value as Record<string, unknown>;
  const optional = <T>(field: string, parse: (v: unknown, i: number) => T): T | undefined => {
    const raw = call[field];
    if (raw === undefined || raw === null) return undefined;
    try {
      return parse(raw, index);
    } catch {
      throw invalidArgument(index, `invalid "${field}"`);
    }
  };
  const input = optional("input", parseBytes);
  const legacyData = optional("data", parseBytes);
  if (input !== undefined && legacyData !== undefined && !equalsBytes(input, legacyData)) {
    throw invalidArgument(index, 'both "data" and "input" are set and not equal');
  }
  return {
    from: optional("from", parseAddress),
    to: optional("to", parseAddress),
    gas: optional("gas", parseQuantity),
    gasPrice: optional("gasPrice", parseQuantity),
    maxFeePerGas: optional("maxFeePerGas", parseQuantity),
    maxPriorityFeePerGas: optional("maxPriorityFeePerGas", parseQuantity),
    value: optional("value", parseQuantity),
    data: input ?? legacyData,
    accessList: optional("accessList", parseAccessList),
  };
}

export function parseLogFilter(value: unknown, index: number): LogFilterParams {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalidArgument(index, "not a filter object");
  }
  const filter = value as Record<string, unknown>;
  const blockHash =
    filter.blockHash === undefined || filter.blockHash === null
      ? undefined
      : parseHash(filter.blockHash, index);
  if (blockHash !== undefined && (filter.fromBlock !== undefined || filter.toBlock !== undefined)) {
    throw invalidArgument(index, "cannot specify both blockHash and fromBlock/toBlock");
  }
  return {
    fromBlock: parseBlockTag(filter.fromBlock, index),
    toBlock: parseBlockTag(filter.toBlock, index),
    blockHash,
    addresses: parseAddressFilter(filter.address, index),
    topics: parseTopicFilter(filter.topics, index),
  };
}

function parseAddressFilter(value: unknown, index: number): Set<string> | undefined {
  if (value === undefined || value === null) return undefined;
  const list = Array.isArray(value) ? value : [value];
  // An empty list restricts nothing, as in geth (it tests the address only when the list has one).
  if (list.length === 0) return undefined;
  return new Set(list.map((entry) => parseAddress(entry, index).toString()));
}

function parseTopicFilter(value: unknown, index: number): Array<Set<string> | null> {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || value.length > 4)
    throw invalidArgument(index, "topics must be an array of at most 4");
  return value.map((position: unknown) => {
    if (position === null) return null;
    const alternatives = Array.isArray(position) ? position : [position];
    // An empty list of alternatives matches anything, as in geth.
    if (alternatives.length === 0) return null;
    return new Set(alternatives.map((topic: unknown) => parseHash(topic, index)));
  });
}

function parseAccessList(value: unknown, index: number): AccessListBytes {
  if (!Array.isArray(value)) throw invalidArgument(index, "accessList must be an array");
  return value.map((entry: unknown): [Uint8Array, Uint8Array[]] => {
    if (typeof entry !== "object" || entry === null)
      throw invalidArgument(index, "invalid access list entry");
    const item = entry as Record<string, unknown>;
    const keys = Array.isArray(item.storageKeys) ? item.storageKeys : [];
    return [
      parseAddress(item.address, index).bytes,
      keys.map((key: unknown) => hexToBytes(parseHash(key, index))),
    ];
  });
}
