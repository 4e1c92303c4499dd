import { keccak_256 } from "@noble/hashes/sha3";
import { toRlp } from "viem";

/**
 * Root of a Merkle-Patricia trie holding one item under key rlp(0) = 0x80: the transactions trie
 * and the receipts trie of a one-transaction block. Automining puts exactly one transaction in
 * every block, so building a trie object per block (as @ethereumjs/vm's BlockBuilder does) would
 * be pure overhead.
 *
 * The trie is a single leaf node [hex-prefix(path), value]; the path is the nibbles 8,0, which
 * hex-prefix encodes for an even-length leaf as 0x20 ‖ 0x80. A root is always the hash of its node.
 */
export function singleItemTrieRoot(value: Uint8Array): Uint8Array {
  return keccak_256(toRlp([Uint8Array.of(0x20, 0x80), value], "bytes"));
}
