/**
 * eth_feeHistory over mined blocks. A block's reward at percentile p is, as in geth, the tip of
 * the transaction reached when the block's transactions, sorted by tip, have used p % of its gas
 * (0 for an empty block).
 */
import { type Hex, quantity } from "../hex.ts";
import type { MinedBlock } from "./types.ts";

export type FeeHistory = {
  oldestBlock: Hex;
  baseFeePerGas: Hex[];
  gasUsedRatio: number[];
  baseFeePerBlobGas: Hex[];
  blobGasUsedRatio: number[];
  reward?: Hex[][];
};

export type FeeHistoryParams = {
  blockCount: number;
  newestBlock: number;
  /** Base fee of the block after `newestBlock` (mined, or the next one to be). */
  nextBaseFee: bigint;
  rewardPercentiles: readonly number[] | undefined;
  blockByNumber(number: number): MinedBlock | undefined;
};

export function feeHistory(params: FeeHistoryParams): FeeHistory {
  const oldest = Math.max(0, params.newestBlock - params.blockCount + 1);
  const history: FeeHistory = {
    oldestBlock: quantity(oldest),
    baseFeePerGas: [],
    gasUsedRatio: [],
    baseFeePerBlobGas: [],
    blobGasUsedRatio: [],
  };
  const rewards: Hex[][] = [];
  for (let n = oldest; n <= params.newestBlock && params.blockCount > 0; n++) {
    const block = params.blockByNumber(n);
    if (block === undefined) break;
    const { header } = block;
    history.baseFeePerGas.push(header.baseFeePerGas);
    history.gasUsedRatio.push(Number(BigInt(header.gasUsed)) / Number(BigInt(header.gasLimit)));
    history.baseFeePerBlobGas.push("0x1");
    history.blobGasUsedRatio.push(0);
    rewards.push(blockRewards(block, params.rewardPercentiles ?? []).map((tip) => quantity(tip)));
  }
  if (history.baseFeePerGas.length > 0) {
    history.baseFeePerGas.push(quantity(params.nextBaseFee));
    history.baseFeePerBlobGas.push("0x1");
  }
  if (params.rewardPercentiles !== undefined) history.reward = rewards;
  return history;
}

/** geth's eth/gasprice/feehistory.go: walk the tips in ascending order, weighted by gas used. */
function blockRewards(block: MinedBlock, percentiles: readonly number[]): bigint[] {
  if (block.receipts.length === 0) return percentiles.map(() => 0n);
  const baseFee = BigInt(block.header.baseFeePerGas);
  const sorted = block.receipts
    .map((receipt) => ({
      gasUsed: BigInt(receipt.gasUsed),
      tip: BigInt(receipt.effectiveGasPrice) - baseFee,
    }))
    .sort((a, b) => (a.tip < b.tip ? -1 : a.tip > b.tip ? 1 : 0));
  const blockGasUsed = Number(BigInt(block.header.gasUsed));
  let index = 0;
  let sumGasUsed = sorted[0]!.gasUsed;
  return percentiles.map((percentile) => {
    const threshold = BigInt(Math.floor((blockGasUsed * percentile) / 100));
    while (sumGasUsed < threshold && index < sorted.length - 1) {
      index++;
      sumGasUsed += sorted[index]!.gasUsed;
    }
    return sorted[index]!.tip;
  });
}
