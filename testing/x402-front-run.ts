/**
 * Another relayer front-running the settler: anyone holding a payer's signed authorization can
 * relay it. The refusal proxy runs the relayer's own transaction against the devnet just before it
 * forwards the settler's next broadcast (rpc-refusal-proxy.ts beforeNextSend), so the relayer's is
 * mined first and the settlement reverts while the seller is paid. No fake: both transactions are
 * real, on the real devnet.
 */
import type { PaymentPayload } from "@x402/core/types";
import type { Address, Hex } from "viem";
import {
  fund,
  newAccount,
  publicClientFor,
  transferWithAuthorizationCalldata,
  walletClientFor,
} from "../devnet/testing.ts";
import { NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../shared/constants.ts";
import type { RpcRefusalProxy } from "./rpc-refusal-proxy.ts";

type SignedAuthorization = {
  authorization: {
    from: Address;
    to: Address;
    value: string;
    validAfter: string;
    validBefore: string;
    nonce: Hex;
  };
  signature: Hex;
};

/**
 * A funded relayer holding `payment`'s signed authorization: `relay()` sends it itself, straight
 * to the devnet, and resolves once it is mined.
 */
export async function relayerOf(
  devnetUrl: string,
  payment: PaymentPayload,
): Promise<{ relay(): Promise<void> }> {
  const relayer = newAccount();
  await fund(devnetUrl, relayer.address, 1_000n * WEI_PER_UNIT);
  const { authorization, signature } = payment.payload as SignedAuthorization;
  return {
    async relay() {
      const hash = await walletClientFor(devnetUrl, relayer).sendTransaction({
        to: NATIVE_TRANSFER_AUTH_ADDRESS,
        data: transferWithAuthorizationCalldata(
          {
            ...authorization,
            value: BigInt(authorization.value),
            validAfter: BigInt(authorization.validAfter),
            validBefore: BigInt(authorization.validBefore),
          },
          signature,
        ),
        gas: 100_000n,
      });
      await publicClientFor(devnetUrl).waitForTransactionReceipt({ hash });
    },
  };
}

/**
 * A funded relayer sends `payment`'s signed authorization itself, mined before the settler's next
 * broadcast through `proxy`; `done` once it has run.
 */
export async function frontRunNextSettlement(
  proxy: RpcRefusalProxy,
  devnetUrl: string,
  payment: PaymentPayload,
): Promise<{ done: Promise<void> }> {
  const { relay } = await relayerOf(devnetUrl, payment);
  return { done: proxy.beforeNextSend(relay) };
}
