/**
 * Wire shapes of mined blocks, transactions, receipts and logs, as geth returns them and viem's
 * formatters read them. The devnet stores mined history in exactly this form: reads then cost
 * nothing but serialisation, and the state file holds plain JSON.
 */
import type { Hex } from "../hex.ts";

export type RpcLog = {
  address: Hex;
  topics: Hex[];
  data: Hex;
  blockNumber: Hex;
  blockHash: Hex;
  blockTimestamp: Hex;
  transactionHash: Hex;
  transactionIndex: Hex;
  logIndex: Hex;
  removed: false;
};

export type RpcAccessListEntry = { address: Hex; storageKeys: Hex[] };

export type RpcTransaction = {
  hash: Hex;
  type: Hex;
  chainId?: Hex;
  nonce: Hex;
  from: Hex;
  to: Hex | null;
  value: Hex;
  gas: Hex;
  /** Legacy and 2930: the price; 1559: the effective price once mined, else maxFeePerGas. */
  gasPrice: Hex;
  maxFeePerGas?: Hex;
  maxPriorityFeePerGas?: Hex;
  accessList?: RpcAccessListEntry[];
  input: Hex;
  v: Hex;
  r: Hex;
  s: Hex;
  yParity?: Hex;
  blockHash: Hex | null;
  blockNumber: Hex | null;
  transactionIndex: Hex | null;
};

export type RpcReceipt = {
  transactionHash: Hex;
  transactionIndex: Hex;
  blockHash: Hex;
  blockNumber: Hex;
  from: Hex;
  to: Hex | null;
  cumulativeGasUsed: Hex;
  gasUsed: Hex;
  effectiveGasPrice: Hex;
  contractAddress: Hex | null;
  logs: RpcLog[];
  logsBloom: Hex;
  status: "0x1" | "0x0";
  type: Hex;
};

/** A block as eth_getBlockBy* returns it, minus `transactions` (hashes or objects per request). */
export type RpcBlockHeader = {
  number: Hex;
  hash: Hex;
  parentHash: Hex;
  nonce: Hex;
  sha3Uncles: Hex;
  logsBloom: Hex;
  transactionsRoot: Hex;
  stateRoot: Hex;
  receiptsRoot: Hex;
  miner: Hex;
  difficulty: Hex;
  totalDifficulty: Hex;
  extraData: Hex;
  size: Hex;
  gasLimit: Hex;
  gasUsed: Hex;
  timestamp: Hex;
  uncles: Hex[];
  baseFeePerGas: Hex;
  mixHash: Hex;
  withdrawals: never[];
  withdrawalsRoot: Hex;
  blobGasUsed: Hex;
  excessBlobGas: Hex;
  parentBeaconBlockRoot: Hex;
};

export type MinedBlock = {
  header: RpcBlockHeader;
  transactions: RpcTransaction[];
  receipts: RpcReceipt[];
};
