/**
 * EIP-1559 transfer built and signed inside the enclave from fields, never a caller's
 * digest (docs/enclave.md, "The enclave's signing policy"). Native value; calldata only for the settler's
 * precompile call. Preparing (serializing and hashing) is separate from signing so that fields viem refuses
 * are found before any spend is reserved.
 */
import { type Address, serializeTransaction, type TransactionSerializableEIP1559 } from "viem";
import { fromHex, type Hex, toHex } from "../shared/hex.ts";
import { keccak256 } from "../shared/keccak.ts";
import { signDigest } from "../shared/secp256k1.ts";

export type TransferFields = {
  chainId: number;
  nonce: number;
  to: Address;
  valueWei: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  gasLimit: bigint;
  /** Calldata: only the settler's precompile call carries any (ops/sign-settlement.ts). */
  data?: Hex;
};

export type PreparedTransfer = { unsigned: TransactionSerializableEIP1559; signingHash: Hex };
export type SignedTransaction = { rawTransaction: Hex; txHash: Hex };

/** Serializes the unsigned type-2 transaction; returns null when viem refuses the fields. */
export function prepareTransfer(fields: TransferFields): PreparedTransfer | null {
  const unsigned: TransactionSerializableEIP1559 = {
    type: "eip1559",
    chainId: fields.chainId,
    nonce: fields.nonce,
    // Lowercase: the checksum was checked at the boundary; viem re-checks mixed case only.
    to: fields.to.toLowerCase() as Address,
    value: fields.valueWei,
    maxFeePerGas: fields.maxFeePerGas,
    maxPriorityFeePerGas: fields.maxPriorityFeePerGas,
    gas: fields.gasLimit,
    ...(fields.data ? { data: fields.data } : {}),
  };
  try {
    return { unsigned, signingHash: hashOf(serializeTransaction(unsigned)) };
  } catch {
    // Tip above the fee cap, a fee above 2^256, and the like.
    return null;
  }
}

/** Signs a prepared transaction (low-S) and returns the raw bytes and their hash. */
export function signPrepared(privateKey: Uint8Array, prepared: PreparedTransfer): SignedTransaction {
  const signature = signDigest(fromHex(prepared.signingHash), privateKey);
  const rawTransaction = serializeTransaction(prepared.unsigned, {
    r: toHex32(signature.r),
    s: toHex32(signature.s),
    yParity: signature.yParity,
  });
  return { rawTransaction, txHash: hashOf(rawTransaction) };
}

/**
 * Keccak-256 with the native sponge (shared/keccak.ts), not viem's JavaScript one: two hashes for
 * every transaction the enclave signs, a twentieth of its busy time under bench:x402.
 */
function hashOf(bytes: Hex): Hex {
  return toHex(keccak256(fromHex(bytes)));
}

function toHex32(value: bigint): Hex {
  return `0x${value.toString(16).padStart(64, "0")}`;
}
