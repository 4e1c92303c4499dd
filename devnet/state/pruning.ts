/**
 * Bounds the memory of the state trie. @ethereumjs/mpt never deletes a node: every block adds
 * the nodes on the paths of the accounts and slots it changed (some 30 for a settlement, 20 kB in
 * memory) and keeps every older version, so under sustained load the trie grew without end. Like
 * geth's full node, which keeps the state of the latest 128 blocks, this keeps the nodes that the
 * state roots of the latest RETAINED_STATES blocks reach, and drops the rest now and then, when
 * the node map has grown to twice what was kept last time (so copying costs O(1) a write).
 * Older states answer as unavailable, as a restored state file's always have.
 */
import type { BatchDBOp, DB } from "@ethereumjs/util";
import { bytesToHex, equalsBytes, KECCAK256_NULL, KECCAK256_RLP, utf8ToBytes } from "@ethereumjs/util";
import { fromRlp } from "viem";

/** geth's TriesInMemory. */
export const RETAINED_STATES = 128;
/** Below this many nodes the map is never compacted (about 5 MB). */
const MIN_NODES_BEFORE_COMPACTION = 5_000;
/** MerkleStateManager keys code by "c" + code hash (prefixCodeHashes, on by default). */
const CODE_KEY_PREFIX = bytesToHex(utf8ToBytes("c")).slice(2);

type Rlp = Uint8Array | Rlp[];
type NodeValue = string | Uint8Array;

/**
 * The trie's node store: keys are unprefixed hex (as @ethereumjs/mpt's CheckpointDB passes them).
 * Unlike MapDB, a shallow copy is the store itself: the state manager's storage tries and
 * historical reads work on shallow copies, and must all see the map compaction puts in place.
 */
export class NodeStore implements DB<string, NodeValue> {
  map = new Map<string, NodeValue>();

  async get(key: string): Promise<NodeValue | undefined> {
    return this.map.get(key);
  }

  async put(key: string, value: NodeValue): Promise<void> {
    this.map.set(key, value);
  }

  async del(key: string): Promise<void> {
    this.map.delete(key);
  }

  async batch(operations: BatchDBOp<string, NodeValue>[]): Promise<void> {
    for (const operation of operations) {
      if (operation.type === "put") this.map.set(operation.key, operation.value);
      else this.map.delete(operation.key);
    }
  }

  shallowCopy(): NodeStore {
    return this;
  }

  async open(): Promise<void> {}
}

export type StatePrunerParams = {
  retainedStates?: number;
  minNodes?: number;
  /** Told once if compaction fails (a node missing); pruning then stops and nothing is lost. */
  onError(error: Error): void;
};

export class StatePruner {
  /** The trie's node store; give it to the trie (`db`), with Bytes values. */
  readonly nodes = new NodeStore();
  readonly #retained: Uint8Array[] = [];
  readonly #retainedStates: number;
  readonly #minNodes: number;
  readonly #onError: (error: Error) => void;
  #keptLastTime = 0;
  #failed = false;

  constructor(params: StatePrunerParams) {
    this.#retainedStates = params.retainedStates ?? RETAINED_STATES;
    this.#minNodes = params.minNodes ?? MIN_NODES_BEFORE_COMPACTION;
    this.#onError = params.onError;
  }

  /** Call with each new block's state root, with every write of the block flushed to the trie. */
  noteBlock(stateRoot: Uint8Array): void {
    this.#retained.push(stateRoot);
    if (this.#retained.length > this.#retainedStates) this.#retained.shift();
    const size = this.nodes.map.size;
    if (this.#failed || size < Math.max(this.#minNodes, 2 * this.#keptLastTime)) return;
    try {
      this.nodes.map = reachableNodes(this.nodes.map, this.#retained);
      this.#keptLastTime = this.nodes.map.size;
    } catch (error) {
      this.#failed = true;
      this.#onError(error instanceof Error ? error : new Error(String(error)));
    }
  }
}

/** The nodes and code reachable from `roots` (account tries, their storage tries), in a new map. */
export function reachableNodes(
  all: ReadonlyMap<string, NodeValue>,
  roots: readonly Uint8Array[],
): Map<string, NodeValue> {
  const kept = new Map<string, NodeValue>();
  const keep = (key: string): Uint8Array | undefined => {
    if (kept.has(key)) return undefined;
    const value = all.get(key);
    if (value === undefined) throw new Error(`state trie node ${key} is missing`);
    if (typeof value === "string") throw new Error("state trie nodes must be stored as bytes");
    kept.set(key, value);
    return value;
  };
  const visitAccount = (account: Uint8Array): void => {
    const [, , storageRoot, codeHash] = fromRlp(account, "bytes") as Uint8Array[];
    if (storageRoot !== undefined) walk(storageRoot, () => {});
    if (codeHash !== undefined && !equalsBytes(codeHash, KECCAK256_NULL)) {
      keep(`${CODE_KEY_PREFIX}${bytesToHex(codeHash).slice(2)}`);
    }
  };
  /** Depth-first over the trie under `root`; `onLeaf` gets each leaf's value. */
  const walk = (root: Uint8Array, onLeaf: (value: Uint8Array) => void): void => {
    if (equalsBytes(root, KECCAK256_RLP)) return;
    const pending: Rlp[] = [];
    const follow = (reference: Rlp): void => {
      if (Array.isArray(reference))
        pending.push(reference); // a node under 32 bytes sits inline
      else if (reference.length === 32) {
        const encoded = keep(bytesToHex(reference).slice(2));
        if (encoded !== undefined) pending.push(fromRlp(encoded, "bytes") as Rlp[]);
      }
    };
    follow(root);
    for (let node = pending.pop(); node !== undefined; node = pending.pop()) {
      if (!Array.isArray(node)) continue;
      if (node.length === 17) {
        for (let i = 0; i < 16; i++) follow(node[i]!);
        continue;
      }
      const [path, next] = node;
      if (!(path instanceof Uint8Array) || next === undefined) throw new Error("malformed state trie node");
      // The high nibble of the first path byte: 0 or 1 an extension, 2 or 3 a leaf.
      if ((path[0] ?? 0) >> 4 >= 2) {
        if (!(next instanceof Uint8Array)) throw new Error("malformed state trie leaf");
        onLeaf(next);
      } else follow(next);
    }
  };
  for (const root of roots) walk(root, visitAccount);
  return kept;
}
