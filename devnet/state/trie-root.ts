import { toRlp } from "viem";
import { keccak256 } from "../../shared/keccak.ts";

type Rlp = Uint8Array | readonly Rlp[];
/** A trie node before hashing: a leaf, extension or branch as the RLP list it encodes to. */
type TrieNode = Rlp[];

type Entry = { path: Uint8Array; value: Uint8Array };

const EMPTY = new Uint8Array(0);

/**
 * Root of the Merkle-Patricia trie that maps rlp(i) to `values[i]`: the transactionsRoot and
 * receiptsRoot of a block (Yellow Paper, appendix D). Built in one pass over the whole list,
 * synchronously, because the block is complete when its roots are taken; @ethereumjs/mpt would
 * insert one key at a time through an async database for the same result.
 */
export function orderedTrieRoot(values: readonly Uint8Array[]): Uint8Array {
  // An empty trie's root is keccak256(rlp("")) (KECCAK256_RLP).
  if (values.length === 0) return keccak256(Uint8Array.of(0x80));
  const entries = values.map((value, i) => ({ path: nibbles(rlpIndex(i)), value }));
  // The root is always hashed, even when its encoding is shorter than 32 bytes.
  return keccak256(toRlp(node(entries, 0), "bytes"));
}

/** The node holding `entries`, whose paths agree on their first `depth` nibbles. */
function node(entries: readonly Entry[], depth: number): TrieNode {
  const [first] = entries;
  if (first === undefined) throw new Error("a trie node needs at least one entry");
  if (entries.length === 1) return [hexPrefix(first.path.subarray(depth), true), first.value];
  const shared = sharedPrefix(entries, depth);
  if (shared > 0) {
    return [
      hexPrefix(first.path.subarray(depth, depth + shared), false),
      reference(node(entries, depth + shared)),
    ];
  }
  const branch: TrieNode = [];
  for (let nibble = 0; nibble < 16; nibble++) {
    const below = entries.filter((entry) => entry.path.length > depth && entry.path[depth] === nibble);
    branch.push(below.length === 0 ? EMPTY : reference(node(below, depth + 1)));
  }
  // Keys of the form rlp(i) are prefix-free, so no path ends at a branch; kept for completeness.
  branch.push(entries.find((entry) => entry.path.length === depth)?.value ?? EMPTY);
  return branch;
}

/** How a parent points at a child: inline when its encoding is under 32 bytes, else by hash. */
function reference(child: TrieNode): Rlp {
  const encoded = toRlp(child, "bytes");
  return encoded.length < 32 ? child : keccak256(encoded);
}

/** Length of the path all `entries` share after `depth`, stopping before any path ends. */
function sharedPrefix(entries: readonly Entry[], depth: number): number {
  const first = entries[0]!.path;
  let length = 0;
  for (;;) {
    const at = depth + length;
    if (at >= first.length) return length;
    const nibble = first[at];
    if (!entries.every((entry) => at < entry.path.length && entry.path[at] === nibble)) return length;
    length++;
  }
}

/** Hex-prefix encoding (Yellow Paper, appendix C): the flag nibble carries leaf/extension and parity. */
function hexPrefix(path: Uint8Array, leaf: boolean): Uint8Array {
  const flag = leaf ? 2 : 0;
  const odd = path.length % 2;
  const out = new Uint8Array(Math.floor(path.length / 2) + 1);
  let i = 0;
  if (odd === 1) out[0] = ((flag + 1) << 4) | path[i++]!;
  else out[0] = flag << 4;
  for (let o = 1; i < path.length; i += 2, o++) out[o] = (path[i]! << 4) | path[i + 1]!;
  return out;
}

/** rlp(i) for a non-negative integer: 0x80 for zero, the byte itself below 0x80, else length-prefixed. */
function rlpIndex(i: number): Uint8Array {
  if (i === 0) return Uint8Array.of(0x80);
  if (i < 0x80) return Uint8Array.of(i);
  const bytes: number[] = [];
  for (let rest = i; rest > 0; rest = Math.floor(rest / 256)) bytes.unshift(rest % 256);
  return Uint8Array.of(0x80 + bytes.length, ...bytes);
}

function nibbles(bytes: Uint8Array): Uint8Array {
  const out = new Uint8Array(bytes.length * 2);
  bytes.forEach((byte, i) => {
    out[2 * i] = byte >> 4;
    out[2 * i + 1] = byte & 0x0f;
  });
  return out;
}
