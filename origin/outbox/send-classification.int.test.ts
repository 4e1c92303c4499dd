import { keccak256 } from "viem";
import { describe, expect, it } from "vitest";
import { fund, newAccount, publicClientFor, usdc } from "../../devnet/testing.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import { useDevnet, useFixture } from "../../testing/stack.ts";
import { createJsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { sendRaw, sendRawBatch } from "./sender.ts";

// How the service reads the chain's answer to a broadcast, against the real devnet (which words
// its refusals as geth does): "nonce too low" means mined already when the chain has the
// transaction's receipt (an earlier broadcast got through: accepted), and a refusal when it has
// not (another transaction took the nonce).

describe("broadcast classification (real devnet)", () => {
  const devnet = useDevnet();
  const rpc = useFixture(
    "JSON-RPC upstream",
    async () => createJsonRpcUpstream({ url: devnet.url, timeoutMs: 5_000 }),
    async (upstream) => upstream.close(),
  );

  const signedTransfer = async (sender: ReturnType<typeof newAccount>, nonce: number, value: bigint) => {
    const rawTx = await sender.signTransaction({
      chainId: CHAIN_ID,
      type: "eip1559",
      to: newAccount().address,
      value,
      nonce,
      gas: 21_000n,
      maxFeePerGas: 3_000_000_000n,
      maxPriorityFeePerGas: 1_000_000_000n,
    });
    return { rawTx, txHash: keccak256(rawTx) };
  };

  it("takes the bytes of a mined transaction, sent again, as accepted (nonce too low, its receipt there)", async () => {
    const sender = newAccount();
    await fund(devnet.url, sender.address, usdc(1n));
    const tx = await signedTransfer(sender, 0, 1n);
    expect(await sendRaw(rpc, tx.rawTx, tx.txHash)).toEqual({ kind: "accepted" });
    await publicClientFor(devnet.url).waitForTransactionReceipt({ hash: tx.txHash });
    // Mutation: classifying every "nonce too low" as a refusal (no receipt read) fails this; so
    // does a devnet that answers "already known" here (that branch is then never taken).
    expect(await sendRaw(rpc, tx.rawTx, tx.txHash)).toEqual({ kind: "accepted" });
    expect(await sendRawBatch(rpc, [tx])).toEqual([{ kind: "accepted" }]);
  });

  it("refuses a transaction whose nonce another transaction took (nonce too low, no receipt of its own)", async () => {
    const sender = newAccount();
    await fund(devnet.url, sender.address, usdc(1n));
    const first = await signedTransfer(sender, 0, 1n);
    await sendRaw(rpc, first.rawTx, first.txHash);
    await publicClientFor(devnet.url).waitForTransactionReceipt({ hash: first.txHash });
    const rival = await signedTransfer(sender, 0, 2n);
    // Mutation: classifying every "nonce too low" as accepted (mined already) fails this.
    expect(await sendRaw(rpc, rival.rawTx, rival.txHash)).toEqual({
      kind: "refused",
      reason: "nonce too low: next nonce 1, tx nonce 0",
    });
  });
});
