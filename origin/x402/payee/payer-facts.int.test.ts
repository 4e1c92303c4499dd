import type { Hex } from "viem";
import { describe, expect, it } from "vitest";
import { NATIVE_TRANSFER_AUTH_ABI } from "../../../devnet/index.ts";
import {
  fund,
  newAccount,
  publicClientFor,
  signTransferAuthorization,
  transferAuthorization,
  transferWithAuthorizationCalldata,
  usdc,
  walletClientFor,
} from "../../../devnet/testing.ts";
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../../../shared/constants.ts";
import { useDevnet, useFixture } from "../../../testing/stack.ts";
import { createJsonRpcUpstream } from "../../chain/json-rpc-upstream.ts";
import { createPayerFactsReader } from "./payer-facts.ts";

// The payer's facts are read as storage and a balance, not as the precompile's authorizationState
// call: what they say must be what that call says, on the real devnet, before and after the
// authorization is used on chain.

describe("a payment's facts on the real devnet", () => {
  const devnet = useDevnet();
  const rpc = useFixture(
    "JSON-RPC upstream",
    async () => createJsonRpcUpstream({ url: devnet.url, timeoutMs: 5_000 }),
    async (upstream) => upstream.close(),
  );

  const authorizationState = (payer: Hex, nonce: Hex) =>
    publicClientFor(devnet.url).readContract({
      address: NATIVE_TRANSFER_AUTH_ADDRESS,
      abi: NATIVE_TRANSFER_AUTH_ABI,
      functionName: "authorizationState",
      args: [payer, nonce],
    });

  it("says an authorization is used exactly when authorizationState does, and the payer's balance", async () => {
    const [payer, payee, relayer] = [newAccount(), newAccount(), newAccount()];
    await fund(devnet.url, payer.address, usdc(10n));
    await fund(devnet.url, relayer.address, usdc(10n));
    const used = transferAuthorization(payer.address, payee.address, 1_000_000n);
    const other = transferAuthorization(payer.address, payee.address, 1_000_000n);
    const facts = createPayerFactsReader(rpc);

    expect(await facts(payer.address, used.nonce)).toEqual({ nonceUsed: false, balanceWei: usdc(10n) });
    expect(await authorizationState(payer.address, used.nonce)).toBe(false);

    const signature = await signTransferAuthorization(payer, used);
    const hash = await walletClientFor(devnet.url, relayer).sendTransaction({
      to: NATIVE_TRANSFER_AUTH_ADDRESS,
      data: transferWithAuthorizationCalldata(used, signature),
    });
    const receipt = await publicClientFor(devnet.url).waitForTransactionReceipt({ hash });
    expect(receipt.status).toBe("success");

    const balance = await publicClientFor(devnet.url).getBalance({ address: payer.address });
    expect(balance).toBe(usdc(9n));
    expect(await authorizationState(payer.address, used.nonce)).toBe(true);
    expect(await facts(payer.address, used.nonce)).toEqual({ nonceUsed: true, balanceWei: balance });
    // Another nonce of the same payer, and the same nonce of another authorizer, are still unused.
    expect(await authorizationState(payer.address, other.nonce)).toBe(false);
    expect(await facts(payer.address, other.nonce)).toEqual({ nonceUsed: false, balanceWei: balance });
    expect(await facts(payee.address, used.nonce)).toEqual({ nonceUsed: false, balanceWei: usdc(1n) });
  });
});
