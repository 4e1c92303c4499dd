/**
 * ethereumjs objects → the wire shapes of types.ts. Done once, when a block is mined.
 */
import type { BlockHeader } from "@ethereumjs/block";
import type { Log } from "@ethereumjs/evm";
import type { AccessList2930Tx, FeeMarket1559Tx, LegacyTx } from "@ethereumjs/tx";
import type { Address } from "@ethereumjs/util";
import { data, type Hex, quantity } from "../hex.ts";
import type { RpcBlockHeader, RpcLog, RpcReceipt, RpcTransaction } from "./types.ts";

/** Transaction types this Cancun devnet accepts; blob (3) and set-code (4) transactions are refused. */
export type SupportedTx = LegacyTx | AccessList2930Tx | FeeMarket1559Tx;

export type TxLocation = { blockHash: Hex; blockNumber: bigint; index: number; baseFee: bigint };

/** What a 1559 transaction pays per gas in a block with `baseFee`; the set price otherwise. */
export function effectiveGasPrice(tx: SupportedTx, baseFee: bigint): bigint {
  if ("maxFeePerGas" in tx) {
    // bigint: Math.min does not apply.
    const capped = baseFee + tx.maxPriorityFeePerGas;
    if (capped < tx.maxFeePerGas) return capped;
    return tx.maxFeePerGas;
  }
  return tx.gasPrice;
}

export function formatHeader(header: BlockHeader, size: number): RpcBlockHeader {
  return {
    number: quantity(header.number),
    hash: data(header.hash()),
    parentHash: data(header.parentHash),
    nonce: data(header.nonce),
    sha3Uncles: data(header.uncleHash),
    logsBloom: data(header.logsBloom),
    transactionsRoot: data(header.transactionsTrie),
    stateRoot: data(header.stateRoot),
    receiptsRoot: data(header.receiptTrie),
    miner: header.coinbase.toString(),
    difficulty: quantity(header.difficulty),
    totalDifficulty: quantity(header.difficulty),
    extraData: data(header.extraData),
    size: quantity(size),
    gasLimit: quantity(header.gasLimit),
    gasUsed: quantity(header.gasUsed),
    timestamp: quantity(header.timestamp),
    uncles: [],
    baseFeePerGas: quantity(header.baseFeePerGas ?? 0n),
    mixHash: data(header.mixHash),
    withdrawals: [],
    withdrawalsRoot: data(header.withdrawalsRoot ?? new Uint8Array(32)),
    blobGasUsed: quantity(header.blobGasUsed ?? 0n),
    excessBlobGas: quantity(header.excessBlobGas ?? 0n),
    parentBeaconBlockRoot: data(header.parentBeaconBlockRoot ?? new Uint8Array(32)),
  };
}

/** `location` is null for a transaction still waiting in the queue. */
export function formatTransaction(
  tx: SupportedTx,
  sender: Address,
  location: TxLocation | null,
): RpcTransaction {
  const common = {
    hash: data(tx.hash()),
    type: quantity(tx.type),
    nonce: quantity(tx.nonce),
    from: sender.toString(),
    to: tx.to === undefined ? null : tx.to.toString(),
    value: quantity(tx.value),
    gas: quantity(tx.gasLimit),
    input: data(tx.data),
    v: quantity(tx.v ?? 0n),
    r: quantity(tx.r ?? 0n),
    s: quantity(tx.s ?? 0n),
    blockHash: location?.blockHash ?? null,
    blockNumber: location === null ? null : quantity(location.blockNumber),
    transactionIndex: location === null ? null : quantity(location.index),
  };
  if ("maxFeePerGas" in tx) {
    return {
      ...common,
      chainId: quantity(tx.chainId),
      gasPrice: quantity(location === null ? tx.maxFeePerGas : effectiveGasPrice(tx, location.baseFee)),
      maxFeePerGas: quantity(tx.maxFeePerGas),
      maxPriorityFeePerGas: quantity(tx.maxPriorityFeePerGas),
      accessList: formatAccessList(tx.accessList),
      yParity: quantity(tx.v ?? 0n),
    };
  }
  if ("accessList" in tx) {
    return {
      ...common,
      chainId: quantity(tx.chainId),
      gasPrice: quantity(tx.gasPrice),
      accessList: formatAccessList(tx.accessList),
      yParity: quantity(tx.v ?? 0n),
    };
  }
  return { ...common, chainId: quantity(tx.common.chainId()), gasPrice: quantity(tx.gasPrice) };
}

export type ReceiptInput = {
  tx: SupportedTx;
  sender: Address;
  location: TxLocation;
  blockTimestamp: bigint;
  status: 0 | 1;
  gasUsed: bigint;
  cumulativeGasUsed: bigint;
  logs: Log[];
  /** logIndex of the first log: logs are numbered across the whole block. */
  firstLogIndex: number;
  logsBloom: Uint8Array;
  contractAddress: Address | undefined;
};

export function formatReceipt(input: ReceiptInput): RpcReceipt {
  const { tx, location } = input;
  const transactionHash = data(tx.hash());
  const blockNumber = quantity(location.blockNumber);
  const transactionIndex = quantity(location.index);
  const logs = input.logs.map(
    ([address, topics, payload], i): RpcLog => ({
      address: data(address),
      topics: topics.map((topic) => data(topic)),
      data: data(payload),
      blockNumber,
      blockHash: location.blockHash,
      blockTimestamp: quantity(input.blockTimestamp),
      transactionHash,
      transactionIndex,
      logIndex: quantity(input.firstLogIndex + i),
      removed: false,
    }),
  );
  return {
    transactionHash,
    transactionIndex,
    blockHash: location.blockHash,
    blockNumber,
    from: input.sender.toString(),
    to: tx.to === undefined ? null : tx.to.toString(),
    cumulativeGasUsed: quantity(input.cumulativeGasUsed),
    gasUsed: quantity(input.gasUsed),
    effectiveGasPrice: quantity(effectiveGasPrice(tx, location.baseFee)),
    contractAddress: input.contractAddress === undefined ? null : input.contractAddress.toString(),
    logs,
    logsBloom: data(input.logsBloom),
    status: input.status === 1 ? "0x1" : "0x0",
    type: quantity(tx.type),
  };
}

function formatAccessList(list: Array<[Uint8Array, Uint8Array[]]>): RpcTransaction["accessList"] {
  return list.map(([address, keys]) => ({
    address: data(address),
    storageKeys: keys.map((key) => data(key)),
  }));
}
