/**
 * The two calls of the NativeTransferAuth precompile that the service makes: the
 * settler's `transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, v, r, s)`
 * and the `authorizationState(authorizer, nonce)` read. One encoder for the enclave (which builds
 * the settlement it signs) and the origin (which reads and reconciles). Runtime-neutral.
 */
import { type Address, encodeFunctionData, parseSignature } from "viem";
import type { TransferWithAuthorizationMessage } from "./eip712.ts";
import type { Hex } from "./hex.ts";

export const SETTLEMENT_ABI = [
  {
    type: "function",
    name: "transferWithAuthorization",
    stateMutability: "nonpayable",
    inputs: [
      { name: "from", type: "address" },
      { name: "to", type: "address" },
      { name: "value", type: "uint256" },
      { name: "validAfter", type: "uint256" },
      { name: "validBefore", type: "uint256" },
      { name: "nonce", type: "bytes32" },
      { name: "v", type: "uint8" },
      { name: "r", type: "bytes32" },
      { name: "s", type: "bytes32" },
    ],
    outputs: [],
  },
  {
    type: "function",
    name: "authorizationState",
    stateMutability: "view",
    inputs: [
      { name: "authorizer", type: "address" },
      { name: "nonce", type: "bytes32" },
    ],
    outputs: [{ name: "", type: "bool" }],
  },
] as const;

/** keccak256("AuthorizationUsed(address,bytes32)"): the event a settlement emits once. */
export const AUTHORIZATION_USED_TOPIC =
  "0x98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a5" as const;

/** Calldata of transferWithAuthorization with the 65-byte signature split into v, r, s. */
export function settlementCalldata(authorization: TransferWithAuthorizationMessage, signature: Hex): Hex {
  const { r, s, v, yParity } = parseSignature(signature);
  return encodeFunctionData({
    abi: SETTLEMENT_ABI,
    functionName: "transferWithAuthorization",
    args: [
      authorization.from,
      authorization.to,
      authorization.value,
      authorization.validAfter,
      authorization.validBefore,
      authorization.nonce,
      Number(v ?? BigInt(27 + yParity)),
      r,
      s,
    ],
  });
}

/** Calldata of authorizationState(authorizer, nonce). */
export function authorizationStateCalldata(authorizer: Address, nonce: Hex): Hex {
  return encodeFunctionData({
    abi: SETTLEMENT_ABI,
    functionName: "authorizationState",
    args: [authorizer, nonce],
  });
}
