/**
 * The devnet's chain: EVM state, mined history, the transactions waiting for the next block and
 * the queue of early transactions, behind one lock. History reads (blocks, transactions,
 * receipts, logs) need no lock: blocks are appended whole. Nor do reads of the latest state: they
 * read the head block's state, which no run changes (a block being built is not `latest` until it
 * is appended, as on any node). Everything else that touches EVM state runs under the lock, one
 * at a time; building a block is one such run.
 */
import type { BlockHeader } from "@ethereumjs/block";
import type { StateManagerInterface } from "@ethereumjs/common";
import { Account, type Address, createAddressFromString, hexToBytes } from "@ethereumjs/util";
import { CHAIN_ID } from "../../shared/constants.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { data, type Hex } from "../hex.ts";
import type { DevnetLogger } from "../logger.ts";
import { Mutex } from "../mutex.ts";
import { formatTransaction, type SupportedTx } from "../rpc/format.ts";
import type { MinedBlock, RpcLog, RpcReceipt, RpcTransaction } from "../rpc/types.ts";
import type { StateSnapshot } from "../state/state-file.ts";
import { BlockBuilder } from "./block-builder.ts";
import { mineWaiting } from "./block-run.ts";
import { BlockStore, type BlockStoreOptions, type LogFilter } from "./block-store.ts";
import { FutureQueue } from "./future-queue.ts";
import { applyGenesisState } from "./genesis.ts";
import { genesisBlock, genesisHeader, headerFromRpc, type Mined } from "./miner.ts";
import { PendingPool, type SendResult } from "./pending-pool.ts";
import { createRecoveryInputs, type RecoveryInputsOf } from "./prefetch.ts";
import { SignatureRecovery } from "./signature-recovery.ts";
import {
  type CallOutcome,
  type CallRequest,
  type EstimateOutcome,
  estimateGas,
  type NextBlock,
  simulateCall,
} from "./simulate.ts";
import { admitSender, parseTransaction } from "./tx-admission.ts";
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
  /** Recovers signatures ahead on worker threads; default none (all on the main thread). */
  recovery?: SignatureRecovery;
  /** Older blocks' home (block-store.ts); default a temporary file. */
  history?: BlockStoreOptions;
};

export type AccountState = { nonce: bigint; balance: bigint; code: Uint8Array };

export type StateUnavailable = { kind: "state_unavailable"; blockNumber: number };

/**
 * A mined block number, "latest" for the head block's state, or "pending" for the state once
 * every transaction sent before the read is mined (the read waits for their block).
 */
export type StateTag = number | "latest" | "pending";

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
  readonly #recovery: SignatureRecovery;
  readonly #recoveryInputs: RecoveryInputsOf = createRecoveryInputs();
  #head: BlockHeader;
  /** The next block's base fee, set by dev_setNextBlockBaseFeePerGas; the rule's when undefined. */
  #nextBaseFeeOverride: bigint | undefined;
  /** A block-building run is queued on the lock and has not started: later arrivals join it. */
  #miningQueued = false;
  /** False (dev_setAutomine, tests only): transactions wait in the pool until dev_mine. */
  #automine = true;
  /** The head's state as a read-only view of the trie, made on the first read after the head moved. */
  #headView: { root: Uint8Array; state: Promise<StateManagerInterface> } | undefined;

  private constructor(
    params: CreateChainParams & { recovery: SignatureRecovery },
    dvm: DevnetVm,
    store: BlockStore,
    head: BlockHeader,
  ) {
    this.operatorPool = params.operatorPool;
    this.#recovery = params.recovery;
    this.#logger = params.logger;
    this.#now = params.now ?? Date.now;
    this.#maxTxsPerBlock = params.maxTxsPerBlock ?? Number.POSITIVE_INFINITY;
    this.#dvm = dvm;
    this.#store = store;
    this.#head = head;
  }

  static async create(options: CreateChainParams): Promise<Chain> {
    const params = { ...options, recovery: options.recovery ?? new SignatureRecovery(0) };
    const store = new BlockStore(params.history);
    const dvm = await createDevnetVm({
      operatorPool: params.operatorPool,
      ecrecover: params.recovery.ecrecover,
      blockHash: (number) => {
        const block = store.byNumber(number);
        return block === undefined ? undefined : hexToBytes(block.header.hash);
      },
      onPruningError: (error) =>
        params.logger.error({ error: error.message }, "pruning old states failed; they are kept from now on"),
    });
    const snapshot = params.snapshot;
    if (snapshot === undefined) {
      await applyGenesisState(dvm.state, params);
      const now = BigInt(Math.floor((params.now ?? Date.now)() / 1000));
      const header = genesisHeader(dvm.common, await dvm.state.getStateRoot(), now);
      store.append(genesisBlock(header));
      return new Chain(params, dvm, store, header);
    }
    try {
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
    } catch (error) {
      store.close();
      throw error;
    }
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
    return this.#nextBaseFeeOverride ?? this.#head.calcNextBaseFee();
  }

  /**
   * Sets the base fee of the next block, whatever the EIP-1559 rule says (as hardhat's and anvil's
   * setNextBlockBaseFeePerGas do): a test raises the fee between a quote and its broadcast. The
   * blocks after it follow the rule from it.
   */
  setNextBaseFee(wei: bigint): void {
    this.#nextBaseFeeOverride = wei;
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
    const waiting = this.#pool.get(key);
    if (waiting !== undefined) {
      // Asked for before its signature came back from a worker: recover it here.
      const sender = waiting.sender ?? senderOf(waiting.tx);
      return sender === undefined ? undefined : formatTransaction(waiting.tx, sender, null);
    }
    const queued = this.#queue.get(key);
    return queued === undefined ? undefined : formatTransaction(queued.tx, queued.sender, null);
  }

  receipt(hash: Hex): RpcReceipt | undefined {
    return this.#store.transaction(hash.toLowerCase())?.receipt;
  }

  logs(filter: LogFilter): RpcLog[] {
    return this.#store.logs(filter);
  }

  /** Account fields at block `at`. */
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
   * Mines `raw` and resolves to its hash once its block is in the store. When the chain is idle
   * the transaction gets a block of its own straight away; when a block is being built it waits,
   * and everything that waited goes into the next block together (block-run.ts). One whose nonce
   * is ahead of its sender's waits in the future queue and resolves when its run ends, or once
   * mined if the run fills the gap.
   */
  sendRawTransaction(raw: Uint8Array): Promise<SendResult> {
    // Everything up to joining the pool is synchronous, so a batch's transactions join in the
    // order the batch lists them.
    const parsed = parseTransaction(raw, this.#dvm.common);
    if (!parsed.ok) return Promise.resolve(parsed);
    const { tx, hash } = parsed.value;
    const mined = this.#store.transaction(hash);
    if (mined !== undefined) return this.#minedAlready(mined.transaction.from, tx.nonce);
    const known = this.#queue.get(hash) !== undefined || this.#pool.get(hash) !== undefined;
    if (known) return Promise.resolve(err({ kind: "already_known" }));
    // The signatures (the costly part) are recovered on a worker meanwhile; the block waits for
    // this transaction's when it comes to it.
    const admitted = this.#recovery.prefetch(this.#recoveryInputs(tx)).then(() => admitSender(tx));
    const answer = this.#pool.submit({ hash, tx, admitted });
    if (!this.#automine) {
      // As a node's pool does: the hash now, the block when dev_mine asks for one (a refusal
      // found then goes to nobody, as a dropped pending transaction would).
      answer.catch(() => {});
      return admitted.then((sender) => (sender.ok ? ok(hash) : sender));
    }
    if (!this.#miningQueued) {
      // The run takes its place in the lock's queue now, so an eth_call that arrives after this
      // transaction runs on a state that includes it.
      this.#miningQueued = true;
      void this.#lock.run(async () => {
        // Node runs pending I/O callbacks before setImmediate callbacks: after this yield, every
        // transaction received so far (while the previous block was built, say) is in the pool
        // and joins this run. Later ones wait for the next.
        await new Promise((resolve) => setImmediate(resolve));
        this.#miningQueued = false;
        await this.#mineWaiting();
      });
    }
    return answer;
  }

  /**
   * dev_setAutomine, tests only: off, a transaction sent waits in the pool (its hash answered at
   * once) until dev_mine, so a test can leave blocks between a read and a transaction's block.
   */
  setAutomine(on: boolean): void {
    this.#automine = on;
  }

  /** dev_mine, tests only: mines everything waiting now, in one run; resolves once stored. */
  mine(): Promise<void> {
    return this.#lock.run(() => this.#mineWaiting());
  }

  #mineWaiting(): Promise<void> {
    return mineWaiting({
      dvm: this.#dvm,
      pool: this.#pool,
      queue: this.#queue,
      logger: this.#logger,
      maxTxsPerBlock: this.#maxTxsPerBlock,
      nextBlock: () => this.#newBlock(),
      append: (mined) => this.#append(mined),
    });
  }

  /**
   * geth's answer to the bytes of a mined transaction: its pool no longer holds them, so they are
   * checked as new, and their nonce is below the sender's.
   */
  async #minedAlready(from: string, nonce: bigint): Promise<SendResult> {
    const account = await this.account(createAddressFromString(from.toLowerCase()), "latest");
    const next = account.ok ? account.value.nonce : nonce + 1n;
    return err({ kind: "nonce_too_low", next, got: nonce });
  }

  call(request: CallRequest, gasLimit: bigint): Promise<CallOutcome> {
    return this.#lock.run(() => simulateCall(this.#dvm, this.#head, this.#nextBlock(), request, gasLimit));
  }

  estimateGas(request: CallRequest, cap: bigint): Promise<EstimateOutcome> {
    return this.#lock.run(() => estimateGas(this.#dvm, this.#head, this.#nextBlock(), request, cap));
  }

  /** dev_setBalance: sets the balance and seals the change in an empty block, so every state has a block. */
  setBalance(address: Address, wei: bigint): Promise<void> {
    return this.#lock.run(async () => {
      const account = (await this.#dvm.state.getAccount(address)) ?? new Account();
      account.balance = wei;
      await this.#dvm.state.putAccount(address, account);
      this.#append(await this.#newBlock().seal());
    });
  }

  /** The whole chain, consistent: taken under the lock, between blocks. */
  snapshot(): Promise<StateSnapshot> {
    return this.#lock.run(async () => ({
      chainId: CHAIN_ID,
      operatorPool: this.operatorPool.toString(),
      accounts: await this.#dvm.state.dump(),
      // Read lazily while the file is written: mined blocks never change, only new ones come.
      blocks: this.#store.range(0, this.height),
    }));
  }

  /** Releases the history file; call after the last read. */
  close(): void {
    this.#store.close();
  }

  /** What a call runs against: the block the next run would build, its time and base fee. */
  #nextBlock(): NextBlock {
    return { timestamp: this.#nextTimestamp(), baseFee: this.nextBaseFee() };
  }

  #newBlock(): BlockBuilder {
    return new BlockBuilder(this.#dvm, this.#head, this.#nextTimestamp(), this.#nextBaseFeeOverride);
  }

  #append(mined: Mined): void {
    this.#store.append(mined.block);
    this.#head = mined.header;
    // Spent by the block that has it; one set while a block already built went on (its builder made
    // before it) is for the block after, and stays.
    if (mined.header.baseFeePerGas === this.#nextBaseFeeOverride) this.#nextBaseFeeOverride = undefined;
    this.#dvm.pruner.noteBlock(mined.header.stateRoot);
  }

  /** Wall-clock seconds, never before the head: blocks may share a second, never go back. */
  #nextTimestamp(): bigint {
    const now = BigInt(Math.floor(this.#now() / 1000));
    return now > this.#head.timestamp ? now : this.#head.timestamp;
  }

  /**
   * The head block's state, without the lock: the view is a copy of the state manager over the
   * same trie nodes, set to the head's state root, so the run building the next block (which
   * writes new nodes and never changes old ones) cannot disturb it. The trie keeps the nodes of
   * the latest states (../state/pruning.ts), the head's among them.
   */
  #headState(): Promise<StateManagerInterface> {
    const root = this.#head.stateRoot;
    if (this.#headView?.root !== root) {
      const view = this.#dvm.state.shallowCopy();
      this.#headView = { root, state: view.setStateRoot(root).then(() => view) };
    }
    return this.#headView.state;
  }

  #withStateAt<T>(
    at: StateTag,
    read: (state: StateManagerInterface) => Promise<T>,
  ): Promise<Result<T, StateUnavailable>> {
    if (at === "latest" || at === this.height) return this.#headState().then(read).then(ok);
    return this.#lock.run(async () => {
      // Queued behind the run that mines what was sent before, and between runs: the head's state.
      if (at === "pending") return ok(await read(this.#dvm.state));
      const blockNumber = at;
      const block = this.#store.byNumber(blockNumber);
      if (block === undefined) return err({ kind: "state_unavailable", blockNumber });
      // The trie keeps the latest states (../state/pruning.ts); a state file restores only the latest.
      const historical = this.#dvm.state.shallowCopy();
      const root = hexToBytes(block.header.stateRoot);
      if (!(await historical.hasStateRoot(root))) return err({ kind: "state_unavailable", blockNumber });
      await historical.setStateRoot(root);
      return ok(await read(historical));
    });
  }
}

function senderOf(tx: SupportedTx): Address | undefined {
  try {
    return tx.getSenderAddress();
  } catch {
    return undefined;
  }
}
