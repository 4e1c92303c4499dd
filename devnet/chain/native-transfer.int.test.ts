import { parseEther } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS } from "../../shared/constants.ts";
import {
  DEFAULT_OPERATOR_POOL_BALANCE_WEI,
  DEV_OPERATOR_POOL_ADDRESS,
  type Devnet,
  startDevnet,
} from "../index.ts";
import { fund, newAccount, publicClientFor, rpc, setNextBaseFee, usdc, walletClientFor } from "../testing.ts";

describe("devnet: genesis and native transfers with viem", () => {
  let devnet: Devnet;

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0 });
  });
  afterAll(async () => {
    await devnet.close();
  });

  it("starts chain 77 with only the operator pool funded and the precompile marker in place", async () => {
    const client = publicClientFor(devnet.url);
    expect(await client.getChainId()).toBe(CHAIN_ID);
    expect(await client.getBlockNumber()).toBe(0n);
    expect(await client.getBalance({ address: DEV_OPERATOR_POOL_ADDRESS })).toBe(
      DEFAULT_OPERATOR_POOL_BALANCE_WEI,
    );
    expect(await client.getCode({ address: NATIVE_TRANSFER_AUTH_ADDRESS })).toBe("0xfe");
    expect(await client.getBalance({ address: newAccount().address })).toBe(0n);
    expect(await client.getTransactionCount({ address: DEV_OPERATOR_POOL_ADDRESS })).toBe(0);
    const genesis = await client.getBlock({ blockNumber: 0n });
    expect(genesis.transactions).toEqual([]);
    expect(genesis.baseFeePerGas).toBe(1_000_000_000n);
  });

  it("sends a native transfer; balances move by exactly value + gasUsed × effectiveGasPrice", async () => {
    const client = publicClientFor(devnet.url);
    const alice = newAccount();
    const bob = newAccount();
    await fund(devnet.url, alice.address, usdc(10n));
    const wallet = walletClientFor(devnet.url, alice);
    const value = parseEther("1.5");

    const before = await client.getBalance({ address: alice.address });
    const hash = await wallet.sendTransaction({ to: bob.address, value });
    const receipt = await client.waitForTransactionReceipt({ hash });

    expect(receipt.status).toBe("success");
    expect(receipt.gasUsed).toBe(21_000n);
    expect(receipt.from).toBe(alice.address.toLowerCase());
    expect(receipt.to).toBe(bob.address.toLowerCase());
    expect(receipt.logs).toEqual([]);
    expect(await client.getBalance({ address: bob.address })).toBe(value);
    expect(await client.getBalance({ address: alice.address })).toBe(
      before - value - receipt.gasUsed * receipt.effectiveGasPrice,
    );
    expect(await client.getTransactionCount({ address: alice.address })).toBe(1);
  });

  it("serves blocks, transactions and receipts in the shape viem reads", async () => {
    const client = publicClientFor(devnet.url);
    const sender = newAccount();
    const recipient = newAccount();
    await fund(devnet.url, sender.address, usdc(5n));
    const wallet = walletClientFor(devnet.url, sender);
    const hash = await wallet.sendTransaction({ to: recipient.address, value: 123n });
    const receipt = await client.waitForTransactionReceipt({ hash });

    const latest = await client.getBlock({ blockTag: "latest" });
    expect(latest.number).toBe(receipt.blockNumber);
    expect(latest.hash).toBe(receipt.blockHash);
    expect(latest.transactions).toEqual([hash]);
    expect(latest.gasUsed).toBe(21_000n);
    expect(latest.gasLimit).toBe(30_000_000n);
    expect(latest.miner).toBe("0x0000000000000000000000000000000000000000");
    expect(latest.size).toBeGreaterThan(0n);
    expect(latest.timestamp).toBeGreaterThan(0n);
    expect(latest.baseFeePerGas).toBeTypeOf("bigint");
    expect(latest.stateRoot).toMatch(/^0x[0-9a-f]{64}$/);
    const parent = await client.getBlock({ blockNumber: latest.number - 1n });
    expect(latest.parentHash).toBe(parent.hash);
    expect(latest.timestamp).toBeGreaterThanOrEqual(parent.timestamp);
    expect((await client.getBlock({ blockHash: latest.hash })).number).toBe(latest.number);

    const full = await client.getBlock({ blockNumber: latest.number, includeTransactions: true });
    expect(full.transactions[0]?.hash).toBe(hash);

    const tx = await client.getTransaction({ hash });
    expect(tx.from).toBe(sender.address.toLowerCase());
    expect(tx.to).toBe(recipient.address.toLowerCase());
    expect(tx.value).toBe(123n);
    expect(tx.nonce).toBe(0);
    expect(tx.type).toBe("eip1559");
    expect(tx.chainId).toBe(CHAIN_ID);
    expect(tx.blockHash).toBe(latest.hash);
    expect(tx.blockNumber).toBe(latest.number);
    expect(tx.transactionIndex).toBe(0);
    expect(tx.gasPrice).toBe(receipt.effectiveGasPrice);

    expect(receipt.transactionIndex).toBe(0);
    expect(receipt.cumulativeGasUsed).toBe(21_000n);
    expect(receipt.type).toBe("eip1559");
    expect(receipt.contractAddress).toBeNull();
    expect(receipt.effectiveGasPrice).toBe(latest.baseFeePerGas! + (tx.maxPriorityFeePerGas ?? 0n));
    expect(await client.getTransactionConfirmations({ hash })).toBe(1n);
  });

  it("lets viem estimate fees and gas, and reports the next base fee", async () => {
    const client = publicClientFor(devnet.url);
    const fees = await client.estimateFeesPerGas();
    expect(fees.maxPriorityFeePerGas).toBe(1_000_000_000n);
    expect(fees.maxFeePerGas).toBeGreaterThan(fees.maxPriorityFeePerGas);
    expect(await client.getGasPrice()).toBeGreaterThan(1_000_000_000n);
    const history = await client.getFeeHistory({ blockCount: 4, rewardPercentiles: [25, 75] });
    expect(history.baseFeePerGas.length).toBe(history.gasUsedRatio.length + 1);
    expect(history.reward?.[0]?.length).toBe(2);
    expect(
      await client.estimateGas({ account: DEV_OPERATOR_POOL_ADDRESS, to: newAccount().address, value: 1n }),
    ).toBe(21_000n);
  });

  it("refuses a replayed or stale transaction with geth's errors", async () => {
    const client = publicClientFor(devnet.url);
    const sender = newAccount();
    await fund(devnet.url, sender.address, usdc(1n));
    const wallet = walletClientFor(devnet.url, sender);
    const request = await wallet.prepareTransactionRequest({ to: newAccount().address, value: 1n });
    const raw = await wallet.signTransaction(request);
    const hash = await client.sendRawTransaction({ serializedTransaction: raw });
    await client.waitForTransactionReceipt({ hash });
    // Mined already: geth answers a re-send of its bytes as a nonce too low, not "already known".
    await expect(client.sendRawTransaction({ serializedTransaction: raw })).rejects.toThrow(/nonce too low/);
    const stale = await wallet.signTransaction({ ...request, value: 2n });
    await expect(client.sendRawTransaction({ serializedTransaction: stale })).rejects.toThrow(
      /nonce too low/,
    );
    const poor = newAccount();
    await expect(
      walletClientFor(devnet.url, poor).sendTransaction({ to: sender.address, value: 1n }),
    ).rejects.toThrow(/insufficient funds/i);
  });

  it("answers a re-send of a mined transaction's bytes with nonce too low, as geth does", async () => {
    const client = publicClientFor(devnet.url);
    const sender = newAccount();
    await fund(devnet.url, sender.address, usdc(1n));
    const wallet = walletClientFor(devnet.url, sender);
    const raw = await wallet.signTransaction(
      await wallet.prepareTransactionRequest({ to: newAccount().address, value: 1n }),
    );
    await client.waitForTransactionReceipt({
      hash: await client.sendRawTransaction({ serializedTransaction: raw }),
    });
    const resent = await rpc(devnet.url, "eth_sendRawTransaction", [raw]);
    // Mutation: answering "already known" for a mined hash (as before) fails this.
    expect(resent.error).toEqual({ code: -32000, message: "nonce too low: next nonce 1, tx nonce 0" });
  });

  it("raises the next block's base fee on request: a transaction below it is refused, the block carries it", async () => {
    const client = publicClientFor(devnet.url);
    const sender = newAccount();
    await fund(devnet.url, sender.address, usdc(1n));
    const base = {
      chainId: CHAIN_ID,
      type: "eip1559",
      to: newAccount().address,
      value: 1n,
      nonce: 0,
      gas: 21_000n,
      maxPriorityFeePerGas: 1n,
    } as const;
    const quotedCap = 2n * (await client.getGasPrice());
    const raised = quotedCap + 1n;
    await setNextBaseFee(devnet.url, raised);
    expect(await client.getGasPrice()).toBeGreaterThan(raised);
    const refused = await rpc(devnet.url, "eth_sendRawTransaction", [
      await sender.signTransaction({ ...base, maxFeePerGas: quotedCap }),
    ]);
    expect(refused.error).toMatchObject({
      code: -32000,
      message: expect.stringMatching(/^max fee per gas less than block base fee/),
    });
    const paying = await sender.signTransaction({ ...base, maxFeePerGas: 2n * raised });
    const receipt = await client.waitForTransactionReceipt({
      hash: await client.sendRawTransaction({ serializedTransaction: paying }),
    });
    expect((await client.getBlock({ blockNumber: receipt.blockNumber })).baseFeePerGas).toBe(raised);
    // One block only: the next follows the EIP-1559 rule from it again (a block far under its gas
    // target lowers the fee).
    await fund(devnet.url, newAccount().address, 1n);
    expect((await client.getBlock()).baseFeePerGas).toBeLessThan(raised);
  });
});
