/**
 * Test support: recomputes a block's transactionsRoot, receiptsRoot, logsBloom and hash from
 * what JSON-RPC returns, without the devnet's code. Encodings come from viem (serializeTransaction,
 * toRlp) and the tries from ethereumjs's own ordered-trie helper, so a test that compares these
 * with the devnet's header checks the devnet's block building against independent code.
 */
import { genTransactionsTrieRoot } from "@ethereumjs/block";
import type { TypedTransaction } from "@ethereumjs/tx";
import {
  type Block,
  bytesToHex,
  concat,
  type Hex,
  hexToBytes,
  keccak256,
  type Log,
  serializeTransaction,
  type Transaction,
  type TransactionReceipt,
  toRlp,
} from "viem";
import { CHAIN_ID } from "../shared/constants.ts";

export type RecomputedBlock = {
  hash: Hex;
  transactionsRoot: Hex;
  receiptsRoot: Hex;
  logsBloom: Hex;
  /** keccak256 of each transaction re-serialized from its JSON fields: must equal its hash. */
  transactionHashes: Hex[];
};

const TYPE_BYTE: Record<string, Hex | undefined> = { legacy: undefined, eip2930: "0x01", eip1559: "0x02" };

export async function recomputeBlock(
  block: Block<bigint, true>,
  receipts: readonly TransactionReceipt[],
): Promise<RecomputedBlock> {
  const serialized = block.transactions.map(reserialize);
  const encodedReceipts = receipts.map(encodeReceipt);
  return {
    hash: headerHash(block),
    transactionsRoot: bytesToHex(await orderedTrieRoot(serialized)),
    receiptsRoot: bytesToHex(await orderedTrieRoot(encodedReceipts)),
    logsBloom: logsBloom(receipts.flatMap((receipt) => receipt.logs)),
    transactionHashes: serialized.map((raw) => keccak256(raw)),
  };
}

/** The 2048-bit bloom of `logs` (Yellow Paper §4.3.1): 3 bits per address and per topic. */
export function logsBloom(logs: readonly Pick<Log, "address" | "topics">[]): Hex {
  const bloom = new Uint8Array(256);
  const add = (item: Hex): void => {
    const hash = hexToBytes(keccak256(item));
    for (const i of [0, 2, 4]) {
      const bit = ((hash[i]! << 8) | hash[i + 1]!) & 2047;
      bloom[255 - (bit >> 3)]! |= 1 << (bit & 7);
    }
  };
  for (const log of logs) {
    add(log.address);
    for (const topic of log.topics) if (topic !== undefined && topic !== null) add(topic);
  }
  return bytesToHex(bloom);
}

/** ethereumjs's MerklePatriciaTrie of rlp(i) → value, through genTransactionsTrieRoot. */
function orderedTrieRoot(values: readonly Hex[]): Promise<Uint8Array> {
  // genTransactionsTrieRoot only calls serialize() on what it is given.
  const items = values.map((value) => ({ serialize: () => hexToBytes(value) }));
  return genTransactionsTrieRoot(items as unknown as TypedTransaction[]);
}

function reserialize(tx: Transaction<bigint, number>): Hex {
  const signature = { r: tx.r, s: tx.s, yParity: tx.yParity ?? 0 };
  const common = {
    // Only a pre-EIP-155 legacy transaction lacks one; the devnet refuses those.
    chainId: tx.chainId ?? CHAIN_ID,
    nonce: tx.nonce,
    gas: tx.gas,
    to: tx.to ?? undefined,
    value: tx.value,
    data: tx.input,
  };
  switch (tx.type) {
    case "eip1559":
      return serializeTransaction(
        {
          ...common,
          type: "eip1559",
          maxFeePerGas: tx.maxFeePerGas,
          maxPriorityFeePerGas: tx.maxPriorityFeePerGas,
          accessList: tx.accessList,
        },
        signature,
      );
    case "eip2930":
      return serializeTransaction(
        { ...common, type: "eip2930", gasPrice: tx.gasPrice, accessList: tx.accessList },
        signature,
      );
    case "legacy":
      return serializeTransaction(
        { ...common, type: "legacy", gasPrice: tx.gasPrice },
        { ...signature, v: tx.v },
      );
    default:
      throw new Error(`unexpected transaction type ${tx.type}`);
  }
}

/** EIP-2718 receipt: type byte ‖ rlp([status, cumulativeGasUsed, logsBloom, logs]). */
function encodeReceipt(receipt: TransactionReceipt): Hex {
  const body = toRlp([
    receipt.status === "success" ? "0x01" : "0x",
    quantity(receipt.cumulativeGasUsed),
    receipt.logsBloom,
    receipt.logs.map((log) => [log.address, log.topics as Hex[], log.data]),
  ]);
  const type = TYPE_BYTE[receipt.type];
  return type === undefined ? body : concat([type, body]);
}

/** keccak256(rlp(header)) over the 20 fields of a Cancun header, in their order. */
function headerHash(block: Block<bigint, true>): Hex {
  return keccak256(
    toRlp([
      block.parentHash,
      block.sha3Uncles,
      block.miner,
      block.stateRoot,
      block.transactionsRoot,
      block.receiptsRoot,
      block.logsBloom!,
      quantity(block.difficulty),
      quantity(block.number!),
      quantity(block.gasLimit),
      quantity(block.gasUsed),
      quantity(block.timestamp),
      block.extraData,
      block.mixHash,
      block.nonce!,
      quantity(block.baseFeePerGas!),
      block.withdrawalsRoot!,
      quantity(block.blobGasUsed),
      quantity(block.excessBlobGas),
      block.parentBeaconBlockRoot!,
    ]),
  );
}

/** An RLP integer: big-endian without leading zeros, and zero as the empty string. */
function quantity(value: bigint): Hex {
  if (value === 0n) return "0x";
  const digits = value.toString(16);
  return `0x${digits.length % 2 === 0 ? digits : `0${digits}`}`;
}
