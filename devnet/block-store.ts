/**
 * Mined history in memory: blocks by number and hash, transactions and receipts by hash, and log
 * queries. Blocks are appended whole after mining, so readers never see a half-built block.
 */
import type { MinedBlock, RpcLog, RpcReceipt, RpcTransaction } from "./rpc-types.ts";

export type LogFilter = {
  fromBlock: number;
  toBlock: number;
  /** Lowercase addresses; undefined matches any. */
  addresses: ReadonlySet<string> | undefined;
  /** Per position: lowercase topics any of which matches, or null for any topic. */
  topics: ReadonlyArray<ReadonlySet<string> | null>;
};

export type StoredTransaction = { transaction: RpcTransaction; receipt: RpcReceipt };

export class BlockStore {
  readonly #blocks: MinedBlock[] = [];
  readonly #byHash = new Map<string, MinedBlock>();
  readonly #transactions = new Map<string, StoredTransaction>();

  /** Appends the next block; its number must follow the head's. */
  append(block: MinedBlock): void {
    const number = Number.parseInt(block.header.number, 16);
    if (number !== this.#blocks.length) {
      throw new Error(`block ${number} does not follow block ${this.#blocks.length - 1}`);
    }
    this.#blocks.push(block);
    this.#byHash.set(block.header.hash, block);
    block.transactions.forEach((transaction, i) => {
      const receipt = block.receipts[i];
      if (receipt === undefined) throw new Error(`block ${number} lacks the receipt of transaction ${i}`);
      this.#transactions.set(transaction.hash, { transaction, receipt });
    });
  }

  get height(): number {
    return this.#blocks.length - 1;
  }

  get head(): MinedBlock {
    const head = this.#blocks.at(-1);
    if (head === undefined) throw new Error("the block store has no genesis block");
    return head;
  }

  byNumber(number: number): MinedBlock | undefined {
    return this.#blocks[number];
  }

  /** `hash` in lowercase 0x form. */
  byHash(hash: string): MinedBlock | undefined {
    return this.#byHash.get(hash);
  }

  /** `hash` in lowercase 0x form. */
  transaction(hash: string): StoredTransaction | undefined {
    return this.#transactions.get(hash);
  }

  all(): readonly MinedBlock[] {
    return this.#blocks;
  }

  logs(filter: LogFilter): RpcLog[] {
    const out: RpcLog[] = [];
    const last = Math.min(filter.toBlock, this.height);
    for (let n = Math.max(filter.fromBlock, 0); n <= last; n++) {
      for (const receipt of this.#blocks[n]?.receipts ?? []) {
        for (const log of receipt.logs) if (matches(log, filter)) out.push(log);
      }
    }
    return out;
  }
}

function matches(log: RpcLog, filter: LogFilter): boolean {
  if (filter.addresses !== undefined && !filter.addresses.has(log.address)) return false;
  for (let i = 0; i < filter.topics.length; i++) {
    const wanted = filter.topics[i];
    if (wanted === null || wanted === undefined) continue;
    const topic = log.topics[i];
    if (topic === undefined || !wanted.has(topic)) return false;
  }
  return true;
}
