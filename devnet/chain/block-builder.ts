/**
 * One block being built: transactions execute one after another on the live state, inside one
 * checkpoint of it that `seal()` commits, closing the block with roots and gas over all of them.
 * Callers hold the chain lock from the first `add` to `seal` (or `abandon`).
 *
 * The block's checkpoint is what ethereumjs's own block runner keeps: without it, each
 * transaction's commit was the state's outermost and wrote its accounts and slots through to the
 * trie, re-hashing their paths, so an account every transaction of a block touches (a relayer, a
 * payee, the coinbase) was written to the trie once per transaction instead of once per block.
 */
import {
  type Block,
  type BlockHeader,
  createBlock,
  createBlockHeader,
  type HeaderData,
} from "@ethereumjs/block";
import type { Address } from "@ethereumjs/util";
import { encodeReceipt, type RunTxResult, runTx } from "@ethereumjs/vm";
import { errorMessage } from "../../shared/error-message.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { data } from "../hex.ts";
import { formatHeader, formatReceipt, formatTransaction, type SupportedTx } from "../rpc/format.ts";
import type { MinedBlock } from "../rpc/types.ts";
import { orderedTrieRoot } from "../state/trie-root.ts";
import { blockSize, childHeaderData, type Mined } from "./miner.ts";
import type { DevnetVm } from "./vm.ts";

type Executed = { tx: SupportedTx; sender: Address; result: RunTxResult };

export class BlockBuilder {
  readonly #dvm: DevnetVm;
  readonly #timestamp: bigint;
  /** Header fields known before execution; sealing adds roots, bloom and gas. */
  readonly #headerData: HeaderData;
  /** The block as the EVM sees it while executing: number, timestamp, base fee, gas limit. */
  readonly #pending: Block;
  readonly #executed: Executed[] = [];
  #gasUsed = 0n;
  /** Whether the block's checkpoint of the state is open (from the first `add`). */
  #checkpointed = false;

  /** `baseFee`: the block's base fee when not the parent's rule (dev_setNextBlockBaseFeePerGas). */
  constructor(dvm: DevnetVm, parent: BlockHeader, timestamp: bigint, baseFee?: bigint) {
    this.#dvm = dvm;
    this.#timestamp = timestamp;
    this.#headerData = childHeaderData(dvm.common, parent, timestamp, baseFee);
    this.#pending = createBlock({ header: this.#headerData }, { common: dvm.common });
  }

  get baseFee(): bigint {
    return this.#pending.header.baseFeePerGas ?? 0n;
  }

  get count(): number {
    return this.#executed.length;
  }

  /** Gas a further transaction may still reserve: the block limit less what earlier ones used. */
  get gasRemaining(): bigint {
    return this.#pending.header.gasLimit - this.#gasUsed;
  }

  /**
   * Executes `tx` as the next transaction of the block. One that reverts is included with status
   * 0; one the EVM refuses outright (it cannot pay, bad nonce) leaves state untouched, is left
   * out, and comes back as the error message.
   */
  async add(tx: SupportedTx, sender: Address): Promise<Result<void, string>> {
    // The precompile reads the block time through this context; set per transaction because
    // eth_call, which shares the VM, may have run since the builder was made.
    this.#dvm.execution.timestamp = this.#timestamp;
    if (!this.#checkpointed) {
      await this.#dvm.state.checkpoint();
      this.#checkpointed = true;
    }
    let result: RunTxResult;
    try {
      // runTx checkpoints state itself and reverts everything when it throws.
      result = await runTx(this.#dvm.vm, { tx, block: this.#pending, blockGasUsed: this.#gasUsed });
    } catch (error) {
      return err(errorMessage(error));
    }
    this.#gasUsed += result.blockGasSpent;
    this.#executed.push({ tx, sender, result });
    return ok(undefined);
  }

  /**
   * Takes back what the added transactions wrote, for a block that will not be sealed: one whose
   * every transaction was refused, or a run that failed part way.
   */
  async abandon(): Promise<void> {
    if (!this.#checkpointed) return;
    this.#checkpointed = false;
    await this.#dvm.state.revert();
  }

  /** The finished block over the state as it now stands; an empty block when nothing was added. */
  async seal(): Promise<Mined> {
    const dvm = this.#dvm;
    if (this.#checkpointed) {
      this.#checkpointed = false;
      await dvm.state.commit();
    }
    const body = this.#executed.map(({ tx }) => ({ type: tx.type, serialized: tx.serialize() }));
    const bloom = new Uint8Array(256);
    for (const { result } of this.#executed) {
      result.bloom.bitvector.forEach((byte, i) => {
        bloom[i]! |= byte;
      });
    }
    const header = createBlockHeader(
      {
        ...this.#headerData,
        stateRoot: await dvm.state.getStateRoot(),
        transactionsTrie: orderedTrieRoot(body.map(({ serialized }) => serialized)),
        receiptTrie: orderedTrieRoot(
          this.#executed.map(({ tx, result }) => encodeReceipt(result.receipt, tx.type)),
        ),
        logsBloom: bloom,
        gasUsed: this.#gasUsed,
      },
      { common: dvm.common },
    );
    const blockHash = data(header.hash());
    const baseFee = header.baseFeePerGas ?? 0n;
    const block: MinedBlock = {
      header: formatHeader(header, blockSize(header, body)),
      transactions: [],
      receipts: [],
    };
    let logIndex = 0;
    this.#executed.forEach(({ tx, sender, result }, index) => {
      const location = { blockHash, blockNumber: header.number, index, baseFee };
      const logs = result.execResult.logs ?? [];
      block.transactions.push(formatTransaction(tx, sender, location));
      block.receipts.push(
        formatReceipt({
          tx,
          sender,
          location,
          blockTimestamp: this.#timestamp,
          status: "status" in result.receipt && result.receipt.status === 1 ? 1 : 0,
          gasUsed: result.totalGasSpent,
          cumulativeGasUsed: result.receipt.cumulativeBlockGasUsed,
          logs,
          firstLogIndex: logIndex,
          logsBloom: result.bloom.bitvector,
          contractAddress: result.createdAddress,
        }),
      );
      logIndex += logs.length;
    });
    return { block, header };
  }
}
