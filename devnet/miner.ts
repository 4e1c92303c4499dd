/**
 * Block production: one block per transaction (automine), and empty blocks that anchor dev-only
 * state changes. Callers hold the chain lock.
 */
import { type BlockHeader, createBlock, createBlockHeader, type HeaderData } from "@ethereumjs/block";
import type { Common } from "@ethereumjs/common";
import type { Address } from "@ethereumjs/util";
import { KECCAK256_RLP } from "@ethereumjs/util";
import { encodeReceipt, runTx } from "@ethereumjs/vm";
import { keccak_256 } from "@noble/hashes/sha3";
import { toRlp } from "viem";
import { BLOCK_GAS_LIMIT, COINBASE_ADDRESS, GENESIS_BASE_FEE_WEI } from "./constants.ts";
import { data } from "./hex.ts";
import { err, ok, type Result } from "./result.ts";
import { formatHeader, formatReceipt, formatTransaction, type SupportedTx } from "./rpc-format.ts";
import type { MinedBlock, RpcBlockHeader } from "./rpc-types.ts";
import { orderedTrieRoot } from "./trie-root.ts";
import type { DevnetVm } from "./vm.ts";

const ZERO_HASH = new Uint8Array(32);
const EMPTY_BLOOM = new Uint8Array(256);

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
export function childHeaderData(common: Common, parent: BlockHeader, timestamp: bigint): HeaderData {
  return {
    parentHash: parent.hash(),
    number: parent.number + 1n,
    timestamp,
    gasLimit: BLOCK_GAS_LIMIT,
    coinbase: COINBASE_ADDRESS,
    baseFeePerGas: parent.calcNextBaseFee(),
    excessBlobGas: parent.calcNextExcessBlobGas(common),
    blobGasUsed: 0n,
    // PREVRANDAO: no beacon chain here; a value that changes every block will do.
    mixHash: keccak_256(parent.hash()),
    parentBeaconBlockRoot: ZERO_HASH,
    withdrawalsRoot: KECCAK256_RLP,
  };
}

/**
 * Executes `tx` in a new block on top of `parent` and commits it to state. A transaction that
 * reverts is mined with status 0; one the EVM refuses outright (it cannot pay, bad nonce) leaves
 * state untouched and comes back as the error message.
 */
export async function mineTransaction(
  dvm: DevnetVm,
  parent: BlockHeader,
  tx: SupportedTx,
  sender: Address,
  timestamp: bigint,
): Promise<Result<Mined, string>> {
  const headerData = childHeaderData(dvm.common, parent, timestamp);
  const pending = createBlock({ header: headerData }, { common: dvm.common });
  dvm.execution.timestamp = timestamp;
  let result: Awaited<ReturnType<typeof runTx>>;
  try {
    // runTx checkpoints state itself and reverts everything when it throws.
    result = await runTx(dvm.vm, { tx, block: pending });
  } catch (error) {
    return err(error instanceof Error ? error.message : String(error));
  }
  const header = createBlockHeader(
    {
      ...headerData,
      stateRoot: await dvm.state.getStateRoot(),
      transactionsTrie: orderedTrieRoot([tx.serialize()]),
      receiptTrie: orderedTrieRoot([encodeReceipt(result.receipt, tx.type)]),
      logsBloom: result.bloom.bitvector,
      gasUsed: result.blockGasSpent,
    },
    { common: dvm.common },
  );
  const location = {
    blockHash: data(header.hash()),
    blockNumber: header.number,
    index: 0,
    baseFee: header.baseFeePerGas ?? 0n,
  };
  const status = "status" in result.receipt && result.receipt.status === 1 ? 1 : 0;
  const block: MinedBlock = {
    header: formatHeader(header, blockSize(header, [tx])),
    transactions: [formatTransaction(tx, sender, location)],
    receipts: [
      formatReceipt({
        tx,
        sender,
        location,
        blockTimestamp: timestamp,
        status,
        gasUsed: result.totalGasSpent,
        cumulativeGasUsed: result.receipt.cumulativeBlockGasUsed,
        logs: result.execResult.logs ?? [],
        logsBloom: result.bloom.bitvector,
        contractAddress: result.createdAddress,
      }),
    ],
  };
  return ok({ block, header });
}

/** A block without transactions over the current state (after a dev_setBalance). */
export async function mineEmptyBlock(dvm: DevnetVm, parent: BlockHeader, timestamp: bigint): Promise<Mined> {
  const header = createBlockHeader(
    {
      ...childHeaderData(dvm.common, parent, timestamp),
      stateRoot: await dvm.state.getStateRoot(),
      transactionsTrie: KECCAK256_RLP,
      receiptTrie: KECCAK256_RLP,
      logsBloom: EMPTY_BLOOM,
      gasUsed: 0n,
    },
    { common: dvm.common },
  );
  return {
    block: { header: formatHeader(header, blockSize(header, [])), transactions: [], receipts: [] },
    header,
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

/** Byte length of the block's RLP: [header, transactions, uncles, withdrawals]. */
function blockSize(header: BlockHeader, txs: readonly SupportedTx[]): number {
  const body = txs.map((tx) => (tx.type === 0 ? tx.raw() : tx.serialize()));
  return toRlp([header.raw(), body, [], []], "bytes").length;
}
