/**
 * Headers of the devnet's blocks: genesis, the fields a child block takes from its parent, and
 * rebuilding a stored header. block-builder.ts fills and seals the blocks themselves.
 */
import { type BlockHeader, createBlockHeader, type HeaderData } from "@ethereumjs/block";
import type { Common } from "@ethereumjs/common";
import { KECCAK256_RLP } from "@ethereumjs/util";
import { keccak256 } from "../../shared/keccak.ts";
import { BLOCK_GAS_LIMIT, COINBASE_ADDRESS, GENESIS_BASE_FEE_WEI } from "../constants.ts";
import { data } from "../hex.ts";
import { rlpBytesLength, rlpListLength } from "../rlp-length.ts";
import { formatHeader } from "../rpc/format.ts";
import type { MinedBlock, RpcBlockHeader } from "../rpc/types.ts";

const ZERO_HASH = new Uint8Array(32);

export type Mined = { block: MinedBlock; header: BlockHeader };

export function genesisHeader(common: Common, stateRoot: Uint8Array, timestamp: bigint): BlockHeader {
  return createBlockHeader(
    {
      number: 0n,
      timestamp,
      gasLimit: BLOCK_GAS_LIMIT,
      baseFeePerGas: GENESIS_BASE_FEE_WEI,
      coinbase: COINBASE_ADDRESS,
      stateRoot,
      excessBlobGas: 0n,
      blobGasUsed: 0n,
      parentBeaconBlockRoot: ZERO_HASH,
      withdrawalsRoot: KECCAK256_RLP,
    },
    { common },
  );
}

export function genesisBlock(header: BlockHeader): MinedBlock {
  return { header: formatHeader(header, blockSize(header, [])), transactions: [], receipts: [] };
}

/** Header fields of the child of `parent`, before execution fills in roots and gas. */
export function childHeaderData(
  common: Common,
  parent: BlockHeader,
  timestamp: bigint,
  baseFee: bigint = parent.calcNextBaseFee(),
): HeaderData {
  return {
    parentHash: parent.hash(),
    number: parent.number + 1n,
    timestamp,
    gasLimit: BLOCK_GAS_LIMIT,
    coinbase: COINBASE_ADDRESS,
    baseFeePerGas: baseFee,
    excessBlobGas: parent.calcNextExcessBlobGas(common),
    blobGasUsed: 0n,
    // PREVRANDAO: no beacon chain here; a value that changes every block will do.
    mixHash: keccak256(parent.hash()),
    parentBeaconBlockRoot: ZERO_HASH,
    withdrawalsRoot: KECCAK256_RLP,
  };
}

/** Rebuilds the ethereumjs header of a stored block, checking that it hashes to the stored hash. */
export function headerFromRpc(common: Common, rpc: RpcBlockHeader): BlockHeader {
  const header = createBlockHeader(
    {
      parentHash: rpc.parentHash,
      uncleHash: rpc.sha3Uncles,
      coinbase: rpc.miner,
      stateRoot: rpc.stateRoot,
      transactionsTrie: rpc.transactionsRoot,
      receiptTrie: rpc.receiptsRoot,
      logsBloom: rpc.logsBloom,
      difficulty: rpc.difficulty,
      number: rpc.number,
      gasLimit: rpc.gasLimit,
      gasUsed: rpc.gasUsed,
      timestamp: rpc.timestamp,
      extraData: rpc.extraData,
      mixHash: rpc.mixHash,
      nonce: rpc.nonce,
      baseFeePerGas: rpc.baseFeePerGas,
      withdrawalsRoot: rpc.withdrawalsRoot,
      blobGasUsed: rpc.blobGasUsed,
      excessBlobGas: rpc.excessBlobGas,
      parentBeaconBlockRoot: rpc.parentBeaconBlockRoot,
    },
    { common },
  );
  if (data(header.hash()) !== rpc.hash)
    throw new Error(`stored block ${rpc.number} does not hash to ${rpc.hash}`);
  return header;
}

/** A transaction of a block body: its type and its serialized form (the bytes its hash is of). */
export type BodyTransaction = { type: number; serialized: Uint8Array };

/**
 * Byte length of the block's RLP, [header, transactions, uncles, withdrawals], counted from the
 * parts' lengths rather than by encoding the whole block again: a legacy transaction sits in the
 * body as its own RLP list (its serialized form), a typed one as a byte string of its serialized
 * form; uncles and withdrawals are empty lists here.
 */
export function blockSize(header: BlockHeader, txs: readonly BodyTransaction[]): number {
  let body = 0;
  for (const { type, serialized } of txs) body += type === 0 ? serialized.length : rlpBytesLength(serialized);
  return rlpListLength(header.serialize().length + rlpListLength(body) + 2 * rlpListLength(0));
}
