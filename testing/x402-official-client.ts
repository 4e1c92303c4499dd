/**
 * The official x402 packages as a payer and a seller on chain 77 use them (docs/x402.md).
 */
import { x402Client } from "@x402/core/client";
import { type ClientEvmSigner, toFacilitatorEvmSigner } from "@x402/evm";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import type { Account, Chain, PublicActions, Transport, WalletClient } from "viem";
import { CAIP2_NETWORK, NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";

/**
 * The official client as a payer uses it: `@x402/core`'s x402Client with `@x402/evm`'s exact
 * scheme. It pays only its default assets unless told, so the native USDC precompile is allowed
 * explicitly, capped at `maxAmountPerPayment` units.
 */
export function chain77X402Client(signer: ClientEvmSigner, maxAmountPerPayment = "10000"): x402Client {
  return x402Client.fromConfig({
    schemes: [{ network: CAIP2_NETWORK, client: new ExactEvmScheme(signer) }],
    spendControls: {
      allowedAssets: [{ network: CAIP2_NETWORK, asset: NATIVE_TRANSFER_AUTH_ADDRESS, maxAmountPerPayment }],
    },
  });
}

/** A viem wallet client with the public actions, whose account pays the gas of settlements. */
export type SettlerWallet = WalletClient<Transport, Chain, Account> & PublicActions<Transport, Chain>;

/**
 * The official facilitator's EVM signer (`@x402/evm`) over `wallet`, as a seller running its own
 * facilitator builds it. x402's signer is structural and loosely typed, viem's actions generic:
 * the casts are at this seam.
 */
export function officialFacilitatorSigner(wallet: SettlerWallet): ReturnType<typeof toFacilitatorEvmSigner> {
  return toFacilitatorEvmSigner({
    address: wallet.account.address,
    readContract: (args) => wallet.readContract(args as unknown as Parameters<typeof wallet.readContract>[0]),
    verifyTypedData: (args) =>
      wallet.verifyTypedData(args as unknown as Parameters<typeof wallet.verifyTypedData>[0]),
    writeContract: (args) =>
      wallet.writeContract(args as unknown as Parameters<typeof wallet.writeContract>[0]),
    sendTransaction: (args) =>
      wallet.sendTransaction(args as unknown as Parameters<typeof wallet.sendTransaction>[0]),
    waitForTransactionReceipt: (args) => wallet.waitForTransactionReceipt(args),
    getCode: (args) => wallet.getCode(args),
  });
}
