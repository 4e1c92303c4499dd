/**
 * Helpers for tests that run against a devnet: viem clients for chain 77 and funding.
 * Test support only; nothing in the devnet imports it.
 */

import {
  type Address,
  type Chain,
  createPublicClient,
  createWalletClient,
  defineChain,
  encodeFunctionData,
  type Hex,
  http,
  type PublicClient,
  parseSignature,
  type Transport,
  toHex,
  type WalletClient,
} from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { CHAIN_ID, WEI_PER_UNIT } from "../shared/constants.ts";
import {
  nativeTransferAuthDomain,
  TRANSFER_WITH_AUTHORIZATION_TYPES,
  type TransferWithAuthorizationMessage,
} from "../shared/eip712.ts";
import { NATIVE_TRANSFER_AUTH_ABI } from "./chain/precompile/abi.ts";

export function devnetChain(url: string): Chain {
  return defineChain({
    id: CHAIN_ID,
    name: "Chain 77 devnet",
    nativeCurrency: { name: "USDC", symbol: "USDC", decimals: 18 },
    rpcUrls: { default: { http: [url] } },
  });
}

export function publicClientFor(url: string): PublicClient<Transport, Chain> {
  return createPublicClient({
    chain: devnetChain(url),
    transport: http(url, { retryCount: 0 }),
    pollingInterval: 50,
  });
}

export function walletClientFor(
  url: string,
  account: PrivateKeyAccount,
): WalletClient<Transport, Chain, PrivateKeyAccount> {
  return createWalletClient({ account, chain: devnetChain(url), transport: http(url, { retryCount: 0 }) });
}

export function newAccount(): PrivateKeyAccount {
  return privateKeyToAccount(generatePrivateKey());
}

/** Whole 6-decimal USDC units → wei. */
export function usdc(units: bigint): bigint {
  return units * 1_000_000n * WEI_PER_UNIT;
}

/** Calls one JSON-RPC method and returns the whole response object. */
export async function rpc(
  url: string,
  method: string,
  params: unknown[] = [],
): Promise<Record<string, unknown>> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  return (await response.json()) as Record<string, unknown>;
}

export type RpcAnswer = { result?: unknown; error?: { code: number; message: string; data?: unknown } };

/**
 * Calls several JSON-RPC methods in one batch (one HTTP request) and returns the answers in call
 * order. The devnet starts a batch's calls in order within one tick, so its transactions wait
 * together and share a block.
 */
export async function rpcBatch(url: string, calls: ReadonlyArray<[string, unknown[]]>): Promise<RpcAnswer[]> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(calls.map(([method, params], id) => ({ jsonrpc: "2.0", id, method, params }))),
  });
  const answers = (await response.json()) as Array<RpcAnswer & { id: number }>;
  return answers.sort((a, b) => a.id - b.id);
}

/** Sets `address`'s balance to `wei` with dev_setBalance. */
export async function fund(url: string, address: string, wei: bigint): Promise<void> {
  const response = await rpc(url, "dev_setBalance", [address, `0x${wei.toString(16)}`]);
  if (response.result !== true) throw new Error(`dev_setBalance failed: ${JSON.stringify(response)}`);
}

/** Sets the next block's base fee (dev_setNextBlockBaseFeePerGas). */
export async function setNextBaseFee(url: string, wei: bigint): Promise<void> {
  const response = await rpc(url, "dev_setNextBlockBaseFeePerGas", [`0x${wei.toString(16)}`]);
  if (response.result !== true)
    throw new Error(`dev_setNextBlockBaseFeePerGas failed: ${JSON.stringify(response)}`);
}

export type TransferAuthorization = TransferWithAuthorizationMessage;

/** An authorization valid from now for ten minutes, with a random nonce, unless overridden. */
export function transferAuthorization(
  from: Address,
  to: Address,
  value: bigint,
  overrides: Partial<TransferAuthorization> = {},
): TransferAuthorization {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const nonce = toHex(crypto.getRandomValues(new Uint8Array(32)));
  return { from, to, value, validAfter: 0n, validBefore: now + 600n, nonce, ...overrides };
}

/** TransferWithAuthorization under the NativeTransferAuth domain. */
export function signTransferAuthorization(
  signer: PrivateKeyAccount,
  message: TransferAuthorization,
): Promise<Hex> {
  return signer.signTypedData({
    domain: nativeTransferAuthDomain(),
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: "TransferWithAuthorization",
    message,
  });
}

/** Calldata of transferWithAuthorization, in the (v, r, s) or the `bytes signature` form. */
export function transferWithAuthorizationCalldata(
  auth: TransferAuthorization,
  signature: Hex,
  form: "vrs" | "bytes" = "vrs",
): Hex {
  const head = [auth.from, auth.to, auth.value, auth.validAfter, auth.validBefore, auth.nonce] as const;
  if (form === "bytes") {
    return encodeFunctionData({
      abi: NATIVE_TRANSFER_AUTH_ABI,
      functionName: "transferWithAuthorization",
      args: [...head, signature],
    });
  }
  const { v, r, s } = parseSignature(signature);
  return encodeFunctionData({
    abi: NATIVE_TRANSFER_AUTH_ABI,
    functionName: "transferWithAuthorization",
    args: [...head, Number(v), r, s],
  });
}

/** The same signature with s' = n − s and v flipped: valid ECDSA, high S (EIP-2 refuses it). */
export function highS(signature: Hex): Hex {
  const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
  const r = signature.slice(2, 66);
  const s = BigInt(`0x${signature.slice(66, 130)}`);
  const v = Number.parseInt(signature.slice(130, 132), 16);
  return `0x${r}${(n - s).toString(16).padStart(64, "0")}${(v === 27 ? 28 : 27).toString(16)}` as Hex;
}
