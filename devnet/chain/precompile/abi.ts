/**
 * The NativeTransferAuth interface as a viem ABI, for clients and tests. The
 * precompile itself dispatches on the selectors below and decodes with abi-words.ts.
 */
import { toEventSelector, toFunctionSelector } from "viem";
import { SETTLEMENT_ABI } from "../../../shared/native-transfer-auth.ts";

export const NATIVE_TRANSFER_AUTH_ABI = [
  // The two calls the service makes, from the one encoder it uses (v, r, s form; authorizationState).
  ...SETTLEMENT_ABI,
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
      { name: "signature", type: "bytes" },
    ],
    outputs: [],
  },
  {
    type: "function",
    name: "balanceOf",
    stateMutability: "view",
    inputs: [{ name: "account", type: "address" }],
    outputs: [{ name: "", type: "uint256" }],
  },
  {
    type: "function",
    name: "name",
    stateMutability: "view",
    inputs: [],
    outputs: [{ name: "", type: "string" }],
  },
  {
    type: "function",
    name: "version",
    stateMutability: "view",
    inputs: [],
    outputs: [{ name: "", type: "string" }],
  },
  {
    type: "function",
    name: "decimals",
    stateMutability: "view",
    inputs: [],
    outputs: [{ name: "", type: "uint8" }],
  },
  {
    type: "function",
    name: "DOMAIN_SEPARATOR",
    stateMutability: "view",
    inputs: [],
    outputs: [{ name: "", type: "bytes32" }],
  },
  {
    type: "event",
    name: "AuthorizationUsed",
    inputs: [
      { name: "authorizer", type: "address", indexed: true },
      { name: "nonce", type: "bytes32", indexed: true },
    ],
  },
  {
    type: "event",
    name: "Transfer",
    inputs: [
      { name: "from", type: "address", indexed: true },
      { name: "to", type: "address", indexed: true },
      { name: "value", type: "uint256", indexed: false },
    ],
  },
] as const;

export const SIGNATURES = {
  transferWithAuthorizationVrs:
    "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)",
  transferWithAuthorizationBytes:
    "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)",
  authorizationState: "authorizationState(address,bytes32)",
  balanceOf: "balanceOf(address)",
  name: "name()",
  version: "version()",
  decimals: "decimals()",
  domainSeparator: "DOMAIN_SEPARATOR()",
} as const;

export type PrecompileFunction = keyof typeof SIGNATURES;

/** Selector (first four calldata bytes, big-endian) → function. */
export const FUNCTION_BY_SELECTOR: ReadonlyMap<number, PrecompileFunction> = new Map(
  (Object.keys(SIGNATURES) as PrecompileFunction[]).map((fn) => [
    Number.parseInt(toFunctionSelector(SIGNATURES[fn]).slice(2), 16),
    fn,
  ]),
);

export const AUTHORIZATION_USED_TOPIC = toEventSelector("AuthorizationUsed(address,bytes32)");
export const TRANSFER_TOPIC = toEventSelector("Transfer(address,address,uint256)");
