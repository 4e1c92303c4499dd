/**
 * What the service knows of the NativeTransferAuth precompile: the settler's
 * `transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, v, r, s)`, encoded
 * once for the enclave (which builds the settlement it signs) and the origin (which reconciles),
 * and where the precompile keeps the authorizations it used, for the devnet (which keeps them there)
 * and the origin (which reads them). Runtime-neutral.
 */
import { type Address, encodeFunctionData, parseSignature } from "viem";
import type { TransferWithAuthorizationMessage } from "./eip712.ts";
import { fromHex, type Hex, toHex } from "./hex.ts";
import { keccak256 } from "./keccak.ts";

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

/**
 * Where the precompile keeps the flag of an authorization it has used: its used authorizations are
 * laid out as Solidity lays out `mapping(address => mapping(bytes32 => bool))` at slot 0, so the
 * flag of (authorizer, nonce) is the word at keccak256(nonce ‖ keccak256(authorizer ‖ 0)), non-zero
 * once used. The devnet's precompile writes it there; the origin reads it with eth_getStorageAt,
 * which a node answers from its latest state without running a call.
 */
export function authorizationSlot(authorizer: Uint8Array, nonce: Uint8Array): Uint8Array {
  if (authorizer.length !== 20 || nonce.length !== 32) {
    throw new Error("authorizationSlot takes a 20-byte authorizer and a 32-byte nonce");
  }
  // The authorizer as a 32-byte word, then the outer mapping's slot (0) as another.
  const outer = new Uint8Array(64);
  outer.set(authorizer, 12);
  const inner = keccak256(outer);
  const key = new Uint8Array(64);
  key.set(nonce, 0);
  key.set(inner, 32);
  return keccak256(key);
}

/** authorizationSlot of a hex authorizer and nonce, as eth_getStorageAt takes it. */
export function authorizationSlotHex(authorizer: Address, nonce: Hex): Hex {
  return toHex(authorizationSlot(fromHex(authorizer), fromHex(nonce)));
}
