/**
 * Chain outcomes → JSON-RPC errors, worded as geth words them: viem recognises these messages
 * and raises its own error classes (NonceTooLowError, InsufficientFundsError, reverts with data).
 */
import { decodeAbiParameters } from "viem";
import { CHAIN_ID } from "../../shared/constants.ts";
import type { CallOutcome } from "../chain/simulate.ts";
import type { TxRejection } from "../chain/tx-admission.ts";
import { data, type Hex } from "../hex.ts";
import { RPC_ERROR_CODES, RpcError } from "./json-rpc.ts";

const ERROR_STRING_SELECTOR = "0x08c379a0";

/** A failed eth_call or eth_estimateGas: a revert is code 3 with the revert data, as in geth. */
export function outcomeError(outcome: Exclude<CallOutcome, { kind: "success" }>): RpcError {
  switch (outcome.kind) {
    case "revert":
      return new RpcError(
        RPC_ERROR_CODES.executionReverted,
        revertMessage(outcome.returnValue),
        data(outcome.returnValue),
      );
    case "halt":
    case "refused":
      return new RpcError(RPC_ERROR_CODES.serverError, outcome.error);
  }
}

/** geth's wording: "execution reverted", plus ": reason" when the data is an Error(string). */
export function revertMessage(returnValue: Uint8Array): string {
  const hex: Hex = data(returnValue);
  if (!hex.startsWith(ERROR_STRING_SELECTOR)) return "execution reverted";
  try {
    const [reason] = decodeAbiParameters([{ type: "string" }], `0x${hex.slice(10)}`);
    return `execution reverted: ${reason}`;
  } catch {
    return "execution reverted";
  }
}

/** Why eth_sendRawTransaction refused a transaction, in geth's words. */
export function rejectionMessage(rejection: TxRejection): string {
  switch (rejection.kind) {
    case "invalid_transaction":
      return `invalid transaction: ${rejection.detail}`;
    case "unsupported_type":
      return "transaction type not supported";
    case "unprotected":
      return "only replay-protected (EIP-155) transactions allowed over RPC";
    case "invalid_sender":
      return "invalid sender";
    case "invalid_chain_id":
      return `invalid sender: invalid chain id for signer: have ${rejection.chainId} want ${CHAIN_ID}`;
    case "tip_above_fee_cap":
      return `max priority fee per gas higher than max fee per gas: maxPriorityFeePerGas: ${rejection.maxPriorityFeePerGas}, maxFeePerGas: ${rejection.maxFeePerGas}`;
    case "intrinsic_gas_too_low":
      return `intrinsic gas too low: gas ${rejection.gas}, minimum needed ${rejection.needed}`;
    case "exceeds_block_gas_limit":
      return "exceeds block gas limit";
    case "already_known":
      return "already known";
    case "nonce_too_low":
      return `nonce too low: next nonce ${rejection.next}, tx nonce ${rejection.got}`;
    case "fee_cap_below_base_fee":
      return `max fee per gas less than block base fee: address ${rejection.sender}, maxFeePerGas: ${rejection.feeCap}, baseFee: ${rejection.baseFee}`;
    case "insufficient_funds":
      return `insufficient funds for gas * price + value: balance ${rejection.balance}, tx cost ${rejection.cost}, overshot ${rejection.cost - rejection.balance}`;
    case "replacement_underpriced":
      return "replacement transaction underpriced";
    case "queue_full":
      return "txpool is full";
    case "execution_refused":
      return rejection.detail;
  }
}
