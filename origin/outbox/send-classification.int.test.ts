import { keccak256 } from "viem";
import { describe, expect, it } from "vitest";
import { fund, newAccount, publicClientFor, usdc } from "../../devnet/testing.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import { useDevnet, useFixture } from "../../testing/stack.ts";
import { createJsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { sendRaw, sendRawBatch } from "./sender.ts";

// What our devnet's answers to a broadcast prove, against the real devnet (which words them as
// geth does; broadcast-answers.test.ts holds the other nodes' words): a validation error about the
// transaction is a refusal; "nonce too low" and "already known" are unknown, whether the bytes were
// mined already or another transaction took the nonce: only the chain's nonce and receipts decide.

describe("broadcast answers of the real devnet", () => {
  const devnet = useDevnet();
  const rpc = useFixture(
    "JSON-RPC upstream",
    async () => createJsonRpcUpstream({ url: devnet.url, timeoutMs: 5_000 }),
    async (upstream) => upstream.close(),
  );

  const signedTransfer = async (
    sender: ReturnType<typeof newAccount>,
    nonce: number,
    value: bigint,
    fields: { gas?: bigint; maxFeePerGas?: bigint; chainId?: number } = {},
  ) => {
    const rawTx = await sender.signTransaction({
      chainId: fields.chainId ?? CHAIN_ID,
      type: "eip1559",
      to: newAccount().address,
      value,
      nonce,
      gas: fields.gas ?? 21_000n,
      maxFeePerGas: fields.maxFeePerGas ?? 3_000_000_000n,
      maxPriorityFeePerGas: fields.maxFeePerGas ?? 1_000_000_000n,
    });
    return { rawTx, txHash: keccak256(rawTx) };
  };

  it("reads the bytes of a mined transaction sent again as unknown (nonce too low), never as a refusal", async () => {
    const sender = newAccount();
    await fund(devnet.url, sender.address, usdc(1n));
    const tx = await signedTransfer(sender, 0, 1n);
    expect(await sendRaw(rpc, tx.rawTx)).toEqual({ kind: "accepted" });
    await publicClientFor(devnet.url).waitForTransactionReceipt({ hash: tx.txHash });
    // Mutation: reading "nonce too low" as a refusal fails this.
    expect(await sendRaw(rpc, tx.rawTx)).toEqual({
      kind: "unknown",
      reason: "nonce too low: next nonce 1, tx nonce 0",
    });
    expect(await sendRawBatch(rpc, [tx])).toEqual([
      { kind: "unknown", reason: "nonce too low: next nonce 1, tx nonce 0" },
    ]);
  });

  it("reads a transaction whose nonce another took as unknown too: its receipt, not the answer, says which was mined", async () => {
    const sender = newAccount();
    await fund(devnet.url, sender.address, usdc(1n));
    const first = await signedTransfer(sender, 0, 1n);
    await sendRaw(rpc, first.rawTx);
    await publicClientFor(devnet.url).waitForTransactionReceipt({ hash: first.txHash });
    const rival = await signedTransfer(sender, 0, 2n);
    expect(await sendRaw(rpc, rival.rawTx)).toEqual({
      kind: "unknown",
      reason: "nonce too low: next nonce 1, tx nonce 0",
    });
  });

  it("reads the devnet's validation errors as refusals: the balance, the fee below the base fee, too little gas, another chain", async () => {
    const poor = newAccount();
    expect(await sendRaw(rpc, (await signedTransfer(poor, 0, 1n)).rawTx)).toMatchObject({
      kind: "refused",
      reason: expect.stringMatching(/^insufficient funds for gas \* price \+ value/),
    });
    const sender = newAccount();
    await fund(devnet.url, sender.address, usdc(1n));
    expect(
      await sendRaw(rpc, (await signedTransfer(sender, 0, 1n, { maxFeePerGas: 1n })).rawTx),
    ).toMatchObject({
      kind: "refused",
      reason: expect.stringMatching(/^max fee per gas less than block base fee/),
    });
    expect(await sendRaw(rpc, (await signedTransfer(sender, 0, 1n, { gas: 20_000n })).rawTx)).toMatchObject({
      kind: "refused",
      reason: expect.stringMatching(/^intrinsic gas too low/),
    });
    expect(await sendRaw(rpc, (await signedTransfer(sender, 0, 1n, { chainId: 1 })).rawTx)).toMatchObject({
      kind: "refused",
    });
  });
});
