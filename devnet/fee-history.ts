/**
 * eth_feeHistory over mined blocks. Every block holds at most one transaction, so a block's
 * reward at any percentile is that transaction's tip (0 for an empty block).
 */
import { type Hex, quantity } from "./hex.ts";
import type { MinedBlock } from "./rpc-types.ts";

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
    const receipt = block.receipts[0];
    const tip = receipt === undefined ? 0n : BigInt(receipt.effectiveGasPrice) - BigInt(header.baseFeePerGas);
    rewards.push((params.rewardPercentiles ?? []).map(() => quantity(tip)));
  }
  if (history.baseFeePerGas.length > 0) {
    history.baseFeePerGas.push(quantity(params.nextBaseFee));
    history.baseFeePerBlobGas.push("0x1");
  }
  if (params.rewardPercentiles !== undefined) history.reward = rewards;
  return history;
}
