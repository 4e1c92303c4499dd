/**
 * The devnet's chain: EVM state, mined history, the transactions waiting for the next block and
 * the queue of early transactions, behind one lock. History reads (blocks, transactions,
 * receipts, logs) need no lock: blocks are appended whole. Everything that touches EVM state
 * runs under the lock, one at a time; building a block is one such run.
 */
import type { BlockHeader } from "@ethereumjs/block";
import type { StateManagerInterface } from "@ethereumjs/common";
import { Account, type Address, hexToBytes } from "@ethereumjs/util";
import { CHAIN_ID } from "../shared/constants.ts";
import { BlockBuilder } from "./block-builder.ts";
import { BlockStore, type LogFilter } from "./block-store.ts";
import { FutureQueue } from "./future-queue.ts";
import { applyGenesisState } from "./genesis.ts";
import { data, type Hex } from "./hex.ts";
import type { DevnetLogger } from "./logger.ts";
import { genesisBlock, genesisHeader, headerFromRpc, type Mined } from "./miner.ts";
import { Mutex } from "./mutex.ts";
import { PendingPool, type SendResult, type Submission } from "./pending-pool.ts";
import { err, ok, type Result } from "./result.ts";
import { formatTransaction } from "./rpc-format.ts";
import type { MinedBlock, RpcLog, RpcReceipt, RpcTransaction } from "./rpc-types.ts";
import {
  type CallOutcome,
  type CallRequest,
  type EstimateOutcome,
  estimateGas,
  simulateCall,
} from "./simulate.ts";
import type { StateSnapshot } from "./state-file.ts";
import { decodeTransaction, feeCap, type TxRejection, upfrontCost } from "./tx-admission.ts";
import { createDevnetVm, type DevnetVm } from "./vm.ts";

export type CreateChainParams = {
  operatorPool: Address;
  operatorPoolBalanceWei: bigint;
  /** Restores this state and history instead of building genesis. */
  snapshot?: StateSnapshot;
  logger: DevnetLogger;
  /** Wall clock in milliseconds; block timestamps follow it. */
  now?: () => number;
  /** Most transactions in one block (the gas limit caps it too). 1 mines one block per transaction. */
  maxTxsPerBlock?: number;
};

export type AccountState = { nonce: bigint; balance: bigint; code: Uint8Array };

export type StateUnavailable = { kind: "state_unavailable"; blockNumber: number };

/** A mined block number, or "latest" for the live state (between blocks under the lock: the head's). */
export type StateTag = number | "latest";

export class Chain {
  readonly operatorPool: Address;
  readonly #dvm: DevnetVm;
  readonly #store: BlockStore;
  readonly #queue = new FutureQueue();
  readonly #pool = new PendingPool();
  readonly #lock = new Mutex();
  readonly #logger: DevnetLogger;
  readonly #now: () => number;
  readonly #maxTxsPerBlock: number;
  #head: BlockHeader;
  /** A block-building run is queued on the lock and has not started: later arrivals join it. */
  #miningQueued = false;

  private constructor(params: CreateChainParams, dvm: DevnetVm, store: BlockStore, head: BlockHeader) {
    this.operatorPool = params.operatorPool;
    this.#logger = params.logger;
    this.#now = params.now ?? Date.now;
    this.#maxTxsPerBlock = params.maxTxsPerBlock ?? Number.POSITIVE_INFINITY;
    this.#dvm = dvm;
    this.#store = store;
    this.#head = head;
  }

  static async create(params: CreateChainParams): Promise<Chain> {
    const store = new BlockStore();
    const dvm = await createDevnetVm({
      operatorPool: params.operatorPool,
      blockHash: (number) => {
        const block = store.byNumber(number);
        return block === undefined ? undefined : hexToBytes(block.header.hash);
      },
    });
    const snapshot = params.snapshot;
    if (snapshot === undefined) {
      await applyGenesisState(dvm.state, params);
      const now = BigInt(Math.floor((params.now ?? Date.now)() / 1000));
      const header = genesisHeader(dvm.common, await dvm.state.getStateRoot(), now);
      store.append(genesisBlock(header));
      return new Chain(params, dvm, store, header);
    }
    await dvm.state.restore(snapshot.accounts);
    for (const block of snapshot.blocks) store.append(block);
    const head = headerFromRpc(dvm.common, store.head.header);
    const root = data(await dvm.state.getStateRoot());
    if (root !== store.head.header.stateRoot) {
      throw new Error(
        `state file is inconsistent: restored state root ${root}, head block has ${store.head.header.stateRoot}`,
      );
    }
    return new Chain(params, dvm, store, head);
  }

  /** Number of the latest block. */
  get height(): number {
    return this.#store.height;
  }

  get head(): MinedBlock {
    return this.#store.head;
  }

  /** Base fee of the next block: what a transaction sent now must at least offer. */
  nextBaseFee(): bigint {
    return this.#head.calcNextBaseFee();
  }

  blockByNumber(number: number): MinedBlock | undefined {
    return this.#store.byNumber(number);
  }

  blockByHash(hash: Hex): MinedBlock | undefined {
    return this.#store.byHash(hash.toLowerCase());
  }

  /** A mined transaction, or one waiting for a block or in the queue (without block fields). */
  transaction(hash: Hex): RpcTransaction | undefined {
    const key = hash.toLowerCase() as Hex;
    const mined = this.#store.transaction(key);
    if (mined !== undefined) return mined.transaction;
    const waiting = this.#pool.get(key) ?? this.#queue.get(key);
    return waiting === undefined ? undefined : formatTransaction(waiting.tx, waiting.sender, null);
  }

  receipt(hash: Hex): RpcReceipt | undefined {
    return this.#store.transaction(hash.toLowerCase())?.receipt;
  }

  logs(filter: LogFilter): RpcLog[] {
    return this.#store.logs(filter);
  }

  /** Account fields at block `at`; "latest" reads the live state. */
  account(address: Address, at: StateTag): Promise<Result<AccountState, StateUnavailable>> {
    return this.#withStateAt(at, async (state) => {
      const account = await state.getAccount(address);
      const code = account?.isContract() === true ? await state.getCode(address) : new Uint8Array(0);
      return { nonce: account?.nonce ?? 0n, balance: account?.balance ?? 0n, code };
    });
  }

  storageAt(address: Address, slot: Uint8Array, at: StateTag): Promise<Result<Uint8Array, StateUnavailable>> {
    return this.#withStateAt(at, (state) => state.getStorage(address, slot));
  }

  /**
   * Mines `raw` and resolves once its block is in the store, or queues it when its nonce is ahead
   * and resolves at once; either way to its hash. When the chain is idle the transaction gets a
   * block of its own straight away; when a block is being built it waits, and everything that
   * waited goes into the next block together.
   */
  sendRawTransaction(raw: Uint8Array): Promise<SendResult> {
    // Decoding recovers the sender (the costly part) outside the lock. Everything up to joining
    // the pool is synchronous, so a batch's transactions join in the order the batch lists them.
    const decoded = decodeTransaction(raw, this.#dvm.common);
    if (!decoded.ok) return Promise.resolve(decoded);
    const { hash } = decoded.value;
    const known =
      this.#store.transaction(hash) !== undefined ||
      this.#queue.get(hash) !== undefined ||
      this.#pool.get(hash) !== undefined;
    if (known) return Promise.resolve(err({ kind: "already_known" }));
    const answer = this.#pool.submit(decoded.value);
    if (!this.#miningQueued) {
      // The run takes its place in the lock's queue now, so a state read that arrives after this
      // transaction still sees it mined.
      this.#miningQueued = true;
      void this.#lock.run(async () => {
        // Building a block never waits on I/O, so requests that arrived meanwhile are still
        // unread. Node runs pending I/O callbacks before setImmediate callbacks: after this
        // yield, every transaction received by then is in the pool and joins this block.
        await new Promise((resolve) => setImmediate(resolve));
        await this.#mineWaiting();
      });
    }
    return answer;
  }

  call(request: CallRequest, gasLimit: bigint): Promise<CallOutcome> {
    return this.#lock.run(() =>
      simulateCall(this.#dvm, this.#head, this.#nextTimestamp(), request, gasLimit),
    );
  }

  estimateGas(request: CallRequest, cap: bigint): Promise<EstimateOutcome> {
    return this.#lock.run(() => estimateGas(this.#dvm, this.#head, this.#nextTimestamp(), request, cap));
  }

  /** dev_setBalance: sets the balance and seals the change in an empty block, so every state has a block. */
  setBalance(address: Address, wei: bigint): Promise<void> {
    return this.#lock.run(async () => {
      const account = (await this.#dvm.state.getAccount(address)) ?? new Account();
      account.balance = wei;
      await this.#dvm.state.putAccount(address, account);
      this.#append(await new BlockBuilder(this.#dvm, this.#head, this.#nextTimestamp()).seal());
    });
  }

  /** The whole chain, consistent: taken under the lock, between blocks. */
  snapshot(): Promise<StateSnapshot> {
    return this.#lock.run(async () => ({
      chainId: CHAIN_ID,
      operatorPool: this.operatorPool.toString(),
      accounts: await this.#dvm.state.dump(),
      blocks: [...this.#store.all()],
    }));
  }

  /**
   * One run under the lock: everything waiting goes into a block; what does not fit (gas limit,
   * maxTxsPerBlock) goes into the next ones, still in this run, so a state read queued behind it
   * sees every transaction sent before the read. Arrivals meanwhile wait for the next run.
   */
  async #mineWaiting(): Promise<void> {
    this.#miningQueued = false;
    try {
      let batch = this.#pool.takeAll();
      while (batch.length > 0) batch = await this.#mineBlock(batch);
    } catch (error) {
      // A bug, not a refused transaction: answer the callers rather than leave them hanging.
      this.#logger.error(
        { error: error instanceof Error ? error.stack : String(error) },
        "block building failed",
      );
      this.#pool.failInFlight(error);
    }
  }

  /** Builds and appends one block from `batch`; returns what did not fit, in order. */
  async #mineBlock(batch: readonly Submission[]): Promise<Submission[]> {
    const builder = new BlockBuilder(this.#dvm, this.#head, this.#nextTimestamp());
    const included: Submission[] = [];
    const leftover: Submission[] = [];
    // A sender with a transaction carried over has its later ones carried over too, in order.
    const carried = new Set<string>();
    const carry = (entry: Submission): void => {
      leftover.push(entry);
      carried.add(entry.sender.toString());
    };
    const place = async (entry: Submission): Promise<void> => {
      if (carried.has(entry.sender.toString())) return carry(entry);
      const outcome = await this.#include(builder, entry);
      if (outcome === "full") return carry(entry);
      if (outcome === "queued") return this.#pool.settle(entry, ok(entry.hash));
      if (outcome !== "included") {
        if (entry.caller === undefined) {
          this.#logger.warn({ tx: entry.hash, reason: outcome.kind }, "dropped a queued transaction");
        }
        return this.#pool.settle(entry, err(outcome));
      }
      included.push(entry);
      // The sender's queued transaction that this one made executable follows it.
      const nonce = entry.tx.nonce + 1n;
      const next = this.#queue.take(entry.sender, nonce);
      if (next !== undefined) await place(this.#pool.adopt(next));
    };
    for (const entry of batch) await place(entry);
    if (builder.count > 0) this.#append(await builder.seal());
    // Answered only now: a caller's receipt is in the store when its call returns.
    this.#pool.settleMined(included);
    return leftover;
  }

  /** Executes `entry` as the builder's next transaction, unless it must wait or be refused. */
  async #include(
    builder: BlockBuilder,
    entry: Submission,
  ): Promise<"included" | "queued" | "full" | TxRejection> {
    const { tx, sender, hash } = entry;
    const account = await this.#dvm.state.getAccount(sender);
    const next = account?.nonce ?? 0n;
    if (tx.nonce < next) return { kind: "nonce_too_low", next, got: tx.nonce };
    if (tx.nonce > next) {
      const queued = this.#queue.add({ hash, tx, sender });
      if (queued.ok) return "queued";
      return queued.error === "replacement_underpriced"
        ? { kind: "replacement_underpriced" }
        : { kind: "queue_full" };
    }
    if (builder.count >= this.#maxTxsPerBlock || tx.gasLimit > builder.gasRemaining) return "full";
    const cap = feeCap(tx);
    if (cap < builder.baseFee)
      return { kind: "fee_cap_below_base_fee", sender, feeCap: cap, baseFee: builder.baseFee };
    const balance = account?.balance ?? 0n;
    const cost = upfrontCost(tx);
    if (balance < cost) return { kind: "insufficient_funds", balance, cost };
    const ran = await builder.add(tx, sender);
    if (!ran.ok) return { kind: "execution_refused", detail: ran.error };
    return "included";
  }

  #append(mined: Mined): void {
    this.#store.append(mined.block);
    this.#head = mined.header;
  }

  /** Wall-clock seconds, never before the head: blocks may share a second, never go back. */
  #nextTimestamp(): bigint {
    const now = BigInt(Math.floor(this.#now() / 1000));
    return now > this.#head.timestamp ? now : this.#head.timestamp;
  }

  #withStateAt<T>(
    at: StateTag,
    read: (state: StateManagerInterface) => Promise<T>,
  ): Promise<Result<T, StateUnavailable>> {
    return this.#lock.run(async () => {
      if (at === "latest" || at === this.height) return ok(await read(this.#dvm.state));
      const blockNumber = at;
      const block = this.#store.byNumber(blockNumber);
      if (block === undefined) return err({ kind: "state_unavailable", blockNumber });
      // The trie keeps every root written since start; a state file restores only the latest.
      const historical = this.#dvm.state.shallowCopy();
      const root = hexToBytes(block.header.stateRoot);
      if (!(await historical.hasStateRoot(root))) return err({ kind: "state_unavailable", blockNumber });
      await historical.setStateRoot(root);
      return ok(await read(historical));
    });
  }
}
