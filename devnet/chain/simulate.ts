/**
 * eth_call and eth_estimateGas: run a transaction nobody signed against the pending block, then
 * roll state back. It goes through runTx (not a bare EVM call) so intrinsic gas, warm addresses,
 * refunds and the fee checks are exactly those of a real transaction. Callers hold the chain lock.
 */
import { type BlockHeader, createBlock } from "@ethereumjs/block";
import { EVMError } from "@ethereumjs/evm";
import {
  type AccessList2930Tx,
  type AccessListBytes,
  createAccessList2930Tx,
  createFeeMarket1559Tx,
  type FeeMarket1559Tx,
} from "@ethereumjs/tx";
import { type Address, createZeroAddress } from "@ethereumjs/util";
import { runTx } from "@ethereumjs/vm";
import { errorMessage } from "../../shared/error-message.ts";
import { childHeaderData } from "./miner.ts";
import type { DevnetVm } from "./vm.ts";

export type CallRequest = {
  from?: Address;
  to?: Address;
  gas?: bigint;
  gasPrice?: bigint;
  maxFeePerGas?: bigint;
  maxPriorityFeePerGas?: bigint;
  value?: bigint;
  data?: Uint8Array;
  accessList?: AccessListBytes;
};

export type CallOutcome =
  | { kind: "success"; returnValue: Uint8Array; gasUsedBeforeRefund: bigint }
  | { kind: "revert"; returnValue: Uint8Array }
  /** An exceptional halt: out of gas, invalid opcode, stack errors. */
  | { kind: "halt"; error: string }
  /**
   * The transaction could not run at all: it cannot pay, its fee cap is below the base fee, or its
   * gas is below its intrinsic gas (`belowIntrinsicGas`, which an estimate reports as geth does).
   */
  | { kind: "refused"; error: string; belowIntrinsicGas?: true };

/**
 * The block a call runs in: the next one's timestamp and base fee (the chain's, which
 * dev_setNextBlockBaseFeePerGas may have set), as the block that mines it would have them.
 */
export type NextBlock = { timestamp: bigint; baseFee: bigint };

export type EstimateOutcome =
  | { kind: "success"; gas: bigint }
  /** Not even the most gas allowed (the cap, or what the balance pays for) is enough. */
  | { kind: "exceeds_allowance"; allowance: bigint }
  | Exclude<CallOutcome, { kind: "success" }>;

export async function simulateCall(
  dvm: DevnetVm,
  parent: BlockHeader,
  next: NextBlock,
  request: CallRequest,
  gasLimit: bigint,
): Promise<CallOutcome> {
  const { timestamp } = next;
  const pricing = pricingOf(next.baseFee, request);
  const block = createBlock(
    { header: { ...childHeaderData(dvm.common, parent, timestamp), baseFeePerGas: pricing.baseFee } },
    { common: dvm.common },
  );
  const from = request.from ?? createZeroAddress();
  // geth's checks of a call that pays fees (its state transition's preCheck), in its order and words.
  if (pricing.priorityFee > pricing.feeCap) {
    return {
      kind: "refused",
      error: `max priority fee per gas higher than max fee per gas: address ${from}, maxPriorityFeePerGas: ${pricing.priorityFee}, maxFeePerGas: ${pricing.feeCap}`,
    };
  }
  if (pricing.feeCap < pricing.baseFee) {
    return {
      kind: "refused",
      error: `max fee per gas less than block base fee: address ${from}, maxFeePerGas: ${pricing.feeCap}, baseFee: ${pricing.baseFee}`,
    };
  }
  const account = await dvm.state.getAccount(from);
  const balance = account?.balance ?? 0n;
  const cost = gasLimit * pricing.feeCap + (request.value ?? 0n);
  if (balance < cost) {
    return {
      kind: "refused",
      error: `insufficient funds for gas * price + value: address ${from} have ${balance} want ${cost}`,
    };
  }
  const fields = {
    nonce: account?.nonce ?? 0n,
    gasLimit,
    to: request.to,
    value: request.value ?? 0n,
    data: request.data ?? new Uint8Array(0),
    accessList: request.accessList ?? [],
  };
  const opts = { common: dvm.common, freeze: false };
  let tx: AccessList2930Tx | FeeMarket1559Tx;
  try {
    tx =
      pricing.gasPrice !== undefined
        ? createAccessList2930Tx({ ...fields, gasPrice: pricing.gasPrice }, opts)
        : createFeeMarket1559Tx(
            { ...fields, maxFeePerGas: pricing.feeCap, maxPriorityFeePerGas: pricing.priorityFee },
            opts,
          );
  } catch (error) {
    // What the checks above leave to ethereumjs: an access list or init code it cannot take.
    return { kind: "refused", error: withoutDump(errorMessage(error)) };
  }
  const intrinsicGas = tx.getIntrinsicGas();
  if (gasLimit < intrinsicGas) {
    return {
      kind: "refused",
      error: `intrinsic gas too low: have ${gasLimit}, want ${intrinsicGas}`,
      belowIntrinsicGas: true,
    };
  }
  // The unsigned transaction speaks for `from`: runTx asks the transaction who sent it.
  tx.getSenderAddress = () => from;

  dvm.execution.timestamp = timestamp;
  await dvm.state.checkpoint();
  try {
    const result = await runTx(dvm.vm, { tx, block, skipNonce: true, skipBlockGasLimitValidation: true });
    const error = result.execResult.exceptionError;
    if (error === undefined) {
      return {
        kind: "success",
        returnValue: result.execResult.returnValue,
        gasUsedBeforeRefund: result.execResult.executionGasUsed + intrinsicGas,
      };
    }
    if (error.error === EVMError.errorMessages.REVERT)
      return { kind: "revert", returnValue: result.execResult.returnValue };
    return { kind: "halt", error: error.error };
  } catch (error) {
    return { kind: "refused", error: withoutDump(errorMessage(error)) };
  } finally {
    await dvm.state.revert();
  }
}

/**
 * The smallest gas limit with which the call succeeds. Usually the gas it used before refunds;
 * when a callee needs headroom (the 63/64 rule, refunds), a binary search up to the cap. As in
 * geth, a priced request is also capped by what the sender's balance can pay for.
 */
export async function estimateGas(
  dvm: DevnetVm,
  parent: BlockHeader,
  next: NextBlock,
  request: CallRequest,
  cap: bigint,
): Promise<EstimateOutcome> {
  const { feeCap } = pricingOf(next.baseFee, request);
  if (feeCap > 0n) {
    const balance = (await dvm.state.getAccount(request.from ?? createZeroAddress()))?.balance ?? 0n;
    const spendable = balance - (request.value ?? 0n);
    if (spendable >= 0n && spendable / feeCap < cap) cap = spendable / feeCap;
  }
  const atCap = await simulateCall(dvm, parent, next, request, cap);
  if (
    (atCap.kind === "halt" && atCap.error === "out of gas") ||
    (atCap.kind === "refused" && atCap.belowIntrinsicGas === true)
  ) {
    // geth's estimator counts a gas limit below the intrinsic gas as one more too-small limit.
    return { kind: "exceeds_allowance", allowance: cap };
  }
  if (atCap.kind !== "success") return atCap;
  const succeeds = async (gas: bigint): Promise<boolean> =>
    (await simulateCall(dvm, parent, next, request, gas)).kind === "success";
  let low = atCap.gasUsedBeforeRefund;
  if (await succeeds(low)) return { kind: "success", gas: low };
  let high = cap;
  while (high - low > 1n) {
    const mid = (low + high) / 2n;
    if (await succeeds(mid)) high = mid;
    else low = mid;
  }
  return { kind: "success", gas: high };
}

type Pricing = { baseFee: bigint; feeCap: bigint; priorityFee: bigint; gasPrice: bigint | undefined };

/**
 * Like geth: a request without any fee field runs free, in a block with base fee 0; one with a
 * fee field pays real fees in the pending block. gasPrice alone makes a legacy-priced call.
 */
function pricingOf(nextBaseFee: bigint, request: CallRequest): Pricing {
  const { gasPrice, maxFeePerGas, maxPriorityFeePerGas } = request;
  if (gasPrice === undefined && maxFeePerGas === undefined && maxPriorityFeePerGas === undefined) {
    return { baseFee: 0n, feeCap: 0n, priorityFee: 0n, gasPrice: undefined };
  }
  const baseFee = nextBaseFee;
  if (maxFeePerGas === undefined && maxPriorityFeePerGas === undefined && gasPrice !== undefined) {
    return { baseFee, feeCap: gasPrice, priorityFee: gasPrice, gasPrice };
  }
  const priorityFee = maxPriorityFeePerGas ?? 0n;
  return { baseFee, feeCap: maxFeePerGas ?? baseFee + priorityFee, priorityFee, gasPrice: undefined };
}

/** ethereumjs appends a dump of the block and transaction after " (vm hf=…"; keep the cause only. */
function withoutDump(message: string): string {
  return message.split(" (vm hf=")[0] ?? message;
}
