/**
 * The devnet's chain: EVM state, mined history and the queue of early transactions, behind one
 * lock. History reads (blocks, transactions, receipts, logs) need no lock: blocks are appended
 * whole. Everything that touches EVM state runs under the lock, one at a time.
 */
import type { BlockHeader } from "@ethereumjs/block";
import type { StateManagerInterface } from "@ethereumjs/common";
import { Account, type Address, hexToBytes } from "@ethereumjs/util";
import { CHAIN_ID } from "../shared/constants.ts";
import { BlockStore, type LogFilter } from "./block-store.ts";
import { FutureQueue } from "./future-queue.ts";
import { applyGenesisState } from "./genesis.ts";
import { data, type Hex } from "./hex.ts";
import type { DevnetLogger } from "./logger.ts";
import {
  genesisBlock,
  genesisHeader,
  headerFromRpc,
  type Mined,
  mineEmptyBlock,
  mineTransaction,
} from "./miner.ts";
import { Mutex } from "./mutex.ts";
import { err, ok, type Result } from "./result.ts";
import { formatTransaction, type SupportedTx } from "./rpc-format.ts";
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
};

export type AccountState = { nonce: bigint; balance: bigint; code: Uint8Array };

export type StateUnavailable = { kind: "state_unavailable"; blockNumber: number };

/** A mined block number, or "latest" for the live state (the head's, which automining keeps current). */
export type StateTag = number | "latest";

export class Chain {
  readonly operatorPool: Address;
  readonly #dvm: DevnetVm;
  readonly #store: BlockStore;
  readonly #queue = new FutureQueue();
  readonly #lock = new Mutex();
  readonly #logger: DevnetLogger;
  readonly #now: () => number;
  #head: BlockHeader;

  private constructor(params: CreateChainParams, dvm: DevnetVm, store: BlockStore, head: BlockHeader) {
    this.operatorPool = params.operatorPool;
    this.#logger = params.logger;
    this.#now = params.now ?? Date.now;
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

  /** A mined transaction, or one waiting in the queue (without block fields). */
  transaction(hash: Hex): RpcTransaction | undefined {
    const key = hash.toLowerCase() as Hex;
    const mined = this.#store.transaction(key);
    if (mined !== undefined) return mined.transaction;
    const queued = this.#queue.get(key);
    return queued === undefined ? undefined : formatTransaction(queued.tx, queued.sender, null);
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

  /** Mines `raw` now (automine), or queues it when its nonce is ahead; resolves to its hash. */
  async sendRawTransaction(raw: Uint8Array): Promise<Result<Hex, TxRejection>> {
    // Decoding recovers the sender (the costly part) outside the lock.
    const decoded = decodeTransaction(raw, this.#dvm.common);
    if (!decoded.ok) return decoded;
    const { tx, sender, hash } = decoded.value;
    return this.#lock.run(async () => {
      if (this.#store.transaction(hash) !== undefined || this.#queue.get(hash) !== undefined) {
        return err({ kind: "already_known" });
      }
      const next = (await this.#dvm.state.getAccount(sender))?.nonce ?? 0n;
      if (tx.nonce < next) return err({ kind: "nonce_too_low", next, got: tx.nonce });
      if (tx.nonce > next) {
        const queued = this.#queue.add({ hash, tx, sender });
        if (queued.ok) return ok(hash);
        return err(
          queued.error === "replacement_underpriced"
            ? { kind: "replacement_underpriced" }
            : { kind: "queue_full" },
        );
      }
      const mined = await this.#mine(tx, sender);
      if (!mined.ok) return mined;
      await this.#promoteQueued(sender);
      return ok(hash);
    });
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
      this.#append(await mineEmptyBlock(this.#dvm, this.#head, this.#nextTimestamp()));
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

  async #mine(tx: SupportedTx, sender: Address): Promise<Result<void, TxRejection>> {
    const baseFee = this.#head.calcNextBaseFee();
    const cap = feeCap(tx);
    if (cap < baseFee) return err({ kind: "fee_cap_below_base_fee", sender, feeCap: cap, baseFee });
    const balance = (await this.#dvm.state.getAccount(sender))?.balance ?? 0n;
    const cost = upfrontCost(tx);
    if (balance < cost) return err({ kind: "insufficient_funds", balance, cost });
    const mined = await mineTransaction(this.#dvm, this.#head, tx, sender, this.#nextTimestamp());
    if (!mined.ok) return err({ kind: "execution_refused", detail: mined.error });
    this.#append(mined.value);
    return ok(undefined);
  }

  /** Mines the sender's queued transactions that have become executable, in nonce order. */
  async #promoteQueued(sender: Address): Promise<void> {
    for (;;) {
      const nonce = (await this.#dvm.state.getAccount(sender))?.nonce ?? 0n;
      const next = this.#queue.take(sender, nonce);
      if (next === undefined) return;
      const mined = await this.#mine(next.tx, sender);
      if (!mined.ok) {
        this.#logger.warn({ tx: next.hash, reason: mined.error.kind }, "dropped a queued transaction");
        return;
      }
    }
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
