/**
 * Mined history: blocks by number and hash, transactions and receipts by hash, and log queries.
 * Blocks are appended whole after mining, so readers never see a half-built block.
 *
 * The most recent blocks stay in memory as objects (clients ask about what they just sent);
 * older ones move to the history file (../state/history-file.ts), so memory stays bounded under sustained
 * load while every block, transaction, receipt and log still answers. What stays in memory for
 * an old block is its place in the file and its log count (to skip it in log queries), and for
 * each block and transaction hash one small index entry.
 */

import type { MinedBlock, RpcLog, RpcReceipt, RpcTransaction } from "../rpc/types.ts";
import { HistoryFile, type HistoryLocation } from "../state/history-file.ts";

export type LogFilter = {
  fromBlock: number;
  toBlock: number;
  /** Lowercase addresses; undefined matches any. */
  addresses: ReadonlySet<string> | undefined;
  /** Per position: lowercase topics any of which matches, or null for any topic. */
  topics: ReadonlyArray<ReadonlySet<string> | null>;
};

export type StoredTransaction = { transaction: RpcTransaction; receipt: RpcReceipt };

export type BlockStoreOptions = {
  /** Where older blocks go; undefined: a temporary file, removed on close. */
  historyFile?: string;
  /** Most blocks kept in memory (at least the head stays). */
  recentBlocks?: number;
  /** Most transactions in the blocks kept in memory: a block may hold over a thousand. */
  recentTransactions?: number;
};

/** BLOCKHASH reaches back 256 blocks; they stay in memory unless they hold too many transactions. */
export const DEFAULT_RECENT_BLOCKS = 256;
/** About 8 MB of transactions and receipts as objects. */
export const DEFAULT_RECENT_TRANSACTIONS = 2_048;
/**
 * Old blocks parsed back from the file are kept, up to this many of their transactions (and at
 * least the last one read), for readers that walk history block by block.
 */
const READ_CACHE_TRANSACTIONS = 512;
/** A transaction's place: block number × this + index (a 30M-gas block holds at most 1,428). */
const TX_SLOTS_PER_BLOCK = 4_096;

export class BlockStore {
  readonly #history: HistoryFile;
  readonly #recentBlocks: number;
  readonly #recentTransactions: number;
  /** Blocks #firstRecent..height, as objects. */
  readonly #recent: MinedBlock[] = [];
  #firstRecent = 0;
  #transactionsInMemory = 0;
  /** Per block below #firstRecent: where it is in the history file, and how many logs it has. */
  readonly #locations: HistoryLocation[] = [];
  readonly #logCounts: number[] = [];
  readonly #blockByHash = new HashIndex();
  readonly #transactionByHash = new HashIndex();
  readonly #readCache = new Map<number, MinedBlock>();
  #transactionsInReadCache = 0;

  constructor(options: BlockStoreOptions = {}) {
    this.#history = new HistoryFile(options.historyFile);
    this.#recentBlocks = Math.max(1, options.recentBlocks ?? DEFAULT_RECENT_BLOCKS);
    this.#recentTransactions = options.recentTransactions ?? DEFAULT_RECENT_TRANSACTIONS;
  }

  /** Appends the next block; its number must follow the head's. */
  append(block: MinedBlock): void {
    const number = Number.parseInt(block.header.number, 16);
    if (number !== this.height + 1) {
      throw new Error(`block ${number} does not follow block ${this.height}`);
    }
    if (block.transactions.length > TX_SLOTS_PER_BLOCK) {
      throw new Error(`block ${number} has more than ${TX_SLOTS_PER_BLOCK} transactions`);
    }
    block.transactions.forEach((_, i) => {
      if (block.receipts[i] === undefined)
        throw new Error(`block ${number} lacks the receipt of transaction ${i}`);
    });
    this.#recent.push(block);
    this.#transactionsInMemory += block.transactions.length;
    this.#blockByHash.add(block.header.hash, number);
    block.transactions.forEach((transaction, i) => {
      this.#transactionByHash.add(transaction.hash, number * TX_SLOTS_PER_BLOCK + i);
    });
    while (
      this.#recent.length > 1 &&
      (this.#recent.length > this.#recentBlocks || this.#transactionsInMemory > this.#recentTransactions)
    ) {
      this.#moveOldestToFile();
    }
  }

  get height(): number {
    return this.#firstRecent + this.#recent.length - 1;
  }

  get head(): MinedBlock {
    const head = this.#recent.at(-1);
    if (head === undefined) throw new Error("the block store has no genesis block");
    return head;
  }

  byNumber(number: number): MinedBlock | undefined {
    if (!Number.isInteger(number) || number < 0 || number > this.height) return undefined;
    if (number >= this.#firstRecent) return this.#recent[number - this.#firstRecent];
    const cached = this.#readCache.get(number);
    if (cached !== undefined) return cached;
    const location = this.#locations[number];
    if (location === undefined) return undefined;
    const block = JSON.parse(this.#history.read(location)) as MinedBlock;
    this.#readCache.set(number, block);
    this.#transactionsInReadCache += block.transactions.length;
    for (const [cachedNumber, cached] of this.#readCache) {
      if (this.#readCache.size === 1 || this.#transactionsInReadCache <= READ_CACHE_TRANSACTIONS) break;
      this.#readCache.delete(cachedNumber);
      this.#transactionsInReadCache -= cached.transactions.length;
    }
    return block;
  }

  /** `hash` in lowercase 0x form. */
  byHash(hash: string): MinedBlock | undefined {
    for (const number of this.#blockByHash.candidates(hash)) {
      const block = this.byNumber(number);
      if (block?.header.hash === hash) return block;
    }
    return undefined;
  }

  /** `hash` in lowercase 0x form. */
  transaction(hash: string): StoredTransaction | undefined {
    for (const place of this.#transactionByHash.candidates(hash)) {
      const block = this.byNumber(Math.floor(place / TX_SLOTS_PER_BLOCK));
      const index = place % TX_SLOTS_PER_BLOCK;
      const transaction = block?.transactions[index];
      const receipt = block?.receipts[index];
      if (transaction?.hash === hash && receipt !== undefined) return { transaction, receipt };
    }
    return undefined;
  }

  /** Blocks `from` to `to` (both included), read one at a time: the whole history never sits in memory. */
  *range(from: number, to: number): Generator<MinedBlock> {
    for (let n = from; n <= to; n++) {
      const block = this.byNumber(n);
      if (block === undefined) throw new Error(`block ${n} is not in the store`);
      yield block;
    }
  }

  logs(filter: LogFilter): RpcLog[] {
    const out: RpcLog[] = [];
    const last = Math.min(filter.toBlock, this.height);
    for (let n = Math.max(filter.fromBlock, 0); n <= last; n++) {
      if (n < this.#firstRecent && this.#logCounts[n] === 0) continue;
      for (const receipt of this.byNumber(n)?.receipts ?? []) {
        for (const log of receipt.logs) if (matches(log, filter)) out.push(log);
      }
    }
    return out;
  }

  /** Closes the history file (a temporary one is removed). */
  close(): void {
    this.#history.close();
  }

  #moveOldestToFile(): void {
    const block = this.#recent.shift();
    if (block === undefined) return;
    this.#locations.push(this.#history.append(JSON.stringify(block)));
    this.#logCounts.push(block.receipts.reduce((sum, receipt) => sum + receipt.logs.length, 0));
    this.#firstRecent++;
    this.#transactionsInMemory -= block.transactions.length;
  }
}

/**
 * Hash → number, keyed by the hash's first 32 bits (a small integer, where a map keyed by the
 * 66-character string would spend over 100 bytes an entry). Different hashes may share a key:
 * lookups get every candidate and check the hash itself.
 */
class HashIndex {
  readonly #entries = new Map<number, number | number[]>();

  add(hash: string, value: number): void {
    const key = hashKey(hash);
    const present = this.#entries.get(key);
    if (present === undefined) this.#entries.set(key, value);
    else if (typeof present === "number") this.#entries.set(key, [present, value]);
    else present.push(value);
  }

  candidates(hash: string): readonly number[] {
    const present = this.#entries.get(hashKey(hash));
    if (present === undefined) return [];
    return typeof present === "number" ? [present] : present;
  }
}

function hashKey(hash: string): number {
  // `| 0`: a signed 32-bit integer, which V8 keeps unboxed.
  return Number.parseInt(hash.slice(2, 10), 16) | 0;
}

function matches(log: RpcLog, filter: LogFilter): boolean {
  if (filter.addresses !== undefined && !filter.addresses.has(log.address)) return false;
  // As geth: a filter naming more positions than the log has topics skips it, wildcards or not
  // (an ERC-721 Transfer filter, four positions, must not match an ERC-20 Transfer, three).
  if (filter.topics.length > log.topics.length) return false;
  for (let i = 0; i < filter.topics.length; i++) {
    const wanted = filter.topics[i];
    if (wanted === null || wanted === undefined) continue;
    const topic = log.topics[i];
    if (topic === undefined || !wanted.has(topic)) return false;
  }
  return true;
}
