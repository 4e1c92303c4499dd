/**
 * Checks a raw transaction must pass before it is mined or queued, and the reasons it can be
 * refused. The state-free checks run here, in two steps around the sender's recovery (which may
 * run on a worker); the chain adds nonce, fee and balance checks when it builds the block.
 */
import type { Common } from "@ethereumjs/common";
import { Capability, createTxFromRLP } from "@ethereumjs/tx";
import { type Address, bigIntToUnpaddedBytes, bytesToBigInt } from "@ethereumjs/util";
import { fromRlp } from "viem";
import { errorMessage } from "../../shared/error-message.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { BLOCK_GAS_LIMIT } from "../constants.ts";
import { data, type Hex } from "../hex.ts";
import type { SupportedTx } from "../rpc/format.ts";
import type { RecoveryInput } from "./signature-recovery.ts";

export type TxRejection =
  | { kind: "invalid_transaction"; detail: string }
  | { kind: "unsupported_type"; type: number }
  | { kind: "unprotected" }
  | { kind: "invalid_sender" }
  | { kind: "invalid_chain_id"; chainId: bigint }
  | { kind: "tip_above_fee_cap"; maxPriorityFeePerGas: bigint; maxFeePerGas: bigint }
  | { kind: "intrinsic_gas_too_low"; gas: bigint; needed: bigint }
  | { kind: "exceeds_block_gas_limit"; gas: bigint }
  | { kind: "already_known" }
  | { kind: "nonce_too_low"; next: bigint; got: bigint }
  | { kind: "fee_cap_below_base_fee"; sender: Address; feeCap: bigint; baseFee: bigint }
  | { kind: "insufficient_funds"; balance: bigint; cost: bigint }
  | { kind: "replacement_underpriced" }
  | { kind: "queue_full" }
  | { kind: "execution_refused"; detail: string };

export type ParsedTx = { tx: SupportedTx; hash: Hex };

/** The state-free checks that need no signature recovery: type, encoding, EIP-155. */
export function parseTransaction(raw: Uint8Array, common: Common): Result<ParsedTx, TxRejection> {
  const first = raw[0];
  if (first === undefined) return err({ kind: "invalid_transaction", detail: "empty transaction" });
  // 0xc0 and above open an RLP list: a legacy transaction. Below, the byte is the EIP-2718 type.
  if (first < 0xc0 && first !== 1 && first !== 2) return err({ kind: "unsupported_type", type: first });
  let tx: SupportedTx;
  try {
    tx = createTxFromRLP(raw, { common }) as SupportedTx;
  } catch (error) {
    return err(refusedByGeth(raw, common) ?? { kind: "invalid_transaction", detail: describe(error) });
  }
  // EIP-155: a pre-155 legacy signature (v = 27 or 28) would be valid on every chain.
  if (tx.type === 0 && (tx.v === 27n || tx.v === 28n)) return err({ kind: "unprotected" });
  return ok({ tx, hash: data(tx.hash()) });
}

/**
 * The sender (recovered through the common's ecrecover, so a key prefetched on a worker is used
 * when there is one), then the gas checks that follow it in geth's order.
 */
export function admitSender(tx: SupportedTx): Result<Address, TxRejection> {
  let sender: Address;
  try {
    sender = tx.getSenderAddress();
  } catch {
    return err({ kind: "invalid_sender" });
  }
  const needed = tx.getIntrinsicGas();
  if (tx.gasLimit < needed) return err({ kind: "intrinsic_gas_too_low", gas: tx.gasLimit, needed });
  if (tx.gasLimit > BLOCK_GAS_LIMIT) return err({ kind: "exceeds_block_gas_limit", gas: tx.gasLimit });
  return ok(sender);
}

/**
 * What ethereumjs's getSenderPublicKey hands to ecrecover for `tx`, computed the same way, so a
 * worker can recover it first. Were the two ever to differ, the prefetched key would just go
 * unused and the sender be recovered on the spot.
 */
export function senderRecoveryInput(tx: SupportedTx): RecoveryInput | undefined {
  const { v, r, s } = tx;
  if (v === undefined || r === undefined || s === undefined) return undefined;
  return {
    hash: tx.getMessageToVerifySignature(),
    v,
    r: bigIntToUnpaddedBytes(r),
    s: bigIntToUnpaddedBytes(s),
    chainId: tx.supports(Capability.EIP155ReplayProtection) ? tx.common.chainId() : undefined,
  };
}

/** The most a transaction can cost its sender: gas at its fee cap, plus the value it sends. */
export function upfrontCost(tx: SupportedTx): bigint {
  return tx.gasLimit * feeCap(tx) + tx.value;
}

export function feeCap(tx: SupportedTx): bigint {
  return "maxFeePerGas" in tx ? tx.maxFeePerGas : tx.gasPrice;
}

/**
 * The refusals ethereumjs makes while decoding that geth's pool names, read from the decoded
 * fields, so the caller gets geth's words (which viem classifies) rather than ethereumjs's: a
 * chain id not this chain's (whose message quotes a function's source), a tip above the fee cap.
 */
function refusedByGeth(raw: Uint8Array, common: Common): TxRejection | undefined {
  let decoded: unknown;
  try {
    decoded = fromRlp(raw[0]! >= 0xc0 ? raw : raw.subarray(1), "bytes");
  } catch {
    return undefined;
  }
  if (!Array.isArray(decoded) || decoded.length < 9) return undefined;
  const field = (i: number): bigint | undefined => {
    const value: unknown = decoded[i];
    return value instanceof Uint8Array ? bytesToBigInt(value) : undefined;
  };
  // Typed: chain id first; legacy: in v (EIP-155: v = chain id × 2 + 35 or 36).
  const v = field(6);
  const chainId = raw[0]! >= 0xc0 ? (v !== undefined && v >= 35n ? (v - 35n) / 2n : undefined) : field(0);
  if (chainId !== undefined && chainId !== common.chainId()) return { kind: "invalid_chain_id", chainId };
  if (raw[0] === 2) {
    const [tip, cap] = [field(2), field(3)];
    if (tip !== undefined && cap !== undefined && tip > cap) {
      return { kind: "tip_above_fee_cap", maxPriorityFeePerGas: tip, maxFeePerGas: cap };
    }
  }
  return undefined;
}

function describe(error: unknown): string {
  const message = errorMessage(error);
  // ethereumjs appends a dump of the transaction after " (tx type=…"; keep the cause only.
  return message.split(" (tx type=")[0] ?? message;
}
