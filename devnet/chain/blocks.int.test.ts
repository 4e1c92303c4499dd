import {
  type Address,
  type Hex,
  keccak256,
  type PublicClient,
  parseEventLogs,
  parseGwei,
  type TransactionReceipt,
  type Transport,
  type Chain as ViemChain,
} from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../../shared/constants.ts";
import { type Devnet, NATIVE_TRANSFER_AUTH_ABI, REVERT_REASONS, startDevnet } from "../index.ts";
import {
  newAccount,
  publicClientFor,
  rpcBatch,
  signTransferAuthorization,
  transferAuthorization,
  transferWithAuthorizationCalldata,
  usdc,
} from "../testing.ts";
import { logsBloom, recomputeBlock } from "../testing-blocks.ts";

type Client = PublicClient<Transport, ViemChain>;

const FEES = { maxFeePerGas: parseGwei("30"), maxPriorityFeePerGas: parseGwei("1") };
const BLOCK_GAS_LIMIT = 30_000_000n;
/** Init code that stores a word at offset 2^32 - 1: the memory cost exceeds any gas limit, so it burns all its gas at once. */
const BURN_ALL_GAS: Hex = "0x600063ffffffff52";

function send(raw: Hex): [string, unknown[]] {
  return ["eth_sendRawTransaction", [raw]];
}

async function signTransfer(
  from: PrivateKeyAccount,
  to: Address,
  fields: {
    value?: bigint;
    nonce?: number;
    gas?: bigint;
    maxFeePerGas?: bigint;
    maxPriorityFeePerGas?: bigint;
  } = {},
): Promise<Hex> {
  return from.signTransaction({
    chainId: CHAIN_ID,
    type: "eip1559",
    to,
    value: fields.value ?? 1_000n,
    nonce: fields.nonce ?? 0,
    gas: fields.gas ?? 21_000n,
    maxFeePerGas: fields.maxFeePerGas ?? FEES.maxFeePerGas,
    maxPriorityFeePerGas: fields.maxPriorityFeePerGas ?? FEES.maxPriorityFeePerGas,
  });
}

async function fundedAccounts(url: string, count: number, wei = usdc(10n)): Promise<PrivateKeyAccount[]> {
  const accounts = Array.from({ length: count }, () => newAccount());
  await rpcBatch(
    url,
    accounts.map((account) => ["dev_setBalance", [account.address, `0x${wei.toString(16)}`]]),
  );
  return accounts;
}

/**
 * Checks everything a block promises about its transactions against independent recomputation:
 * positions, cumulative gas, log numbering, bloom, both roots and the header hash.
 */
async function expectExactBlock(
  client: Client,
  blockNumber: bigint,
): Promise<{ hashes: Hex[]; receipts: TransactionReceipt[] }> {
  const block = await client.getBlock({ blockNumber, includeTransactions: true });
  const receipts = await Promise.all(
    block.transactions.map((tx) => client.getTransactionReceipt({ hash: tx.hash })),
  );
  let cumulative = 0n;
  let logIndex = 0;
  block.transactions.forEach((tx, i) => {
    const receipt = receipts[i]!;
    expect(tx.blockNumber).toBe(blockNumber);
    expect(tx.blockHash).toBe(block.hash);
    expect(tx.transactionIndex).toBe(i);
    expect(receipt.transactionHash).toBe(tx.hash);
    expect(receipt.transactionIndex).toBe(i);
    expect(receipt.blockNumber).toBe(blockNumber);
    expect(receipt.blockHash).toBe(block.hash);
    cumulative += receipt.gasUsed;
    expect(receipt.cumulativeGasUsed).toBe(cumulative);
    expect(receipt.logsBloom).toBe(logsBloom(receipt.logs));
    for (const log of receipt.logs) {
      expect(log.logIndex).toBe(logIndex++);
      expect(log.transactionIndex).toBe(i);
      expect(log.transactionHash).toBe(tx.hash);
      expect(log.blockHash).toBe(block.hash);
    }
  });
  expect(block.gasUsed).toBe(cumulative);
  expect(block.gasUsed).toBeLessThanOrEqual(block.gasLimit);
  const byBlockHash = await client.getLogs({ blockHash: block.hash });
  expect(byBlockHash).toEqual(receipts.flatMap((receipt) => receipt.logs));

  const recomputed = await recomputeBlock(block, receipts);
  expect(recomputed.transactionHashes).toEqual(block.transactions.map((tx) => tx.hash));
  expect(block.transactionsRoot).toBe(recomputed.transactionsRoot);
  expect(block.receiptsRoot).toBe(recomputed.receiptsRoot);
  expect(block.logsBloom).toBe(recomputed.logsBloom);
  expect(block.hash).toBe(recomputed.hash);
  return { hashes: block.transactions.map((tx) => tx.hash), receipts };
}

describe("devnet: transactions that wait share a block", () => {
  let devnet: Devnet;
  let url: string;
  let client: Client;

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0 });
    url = devnet.url;
    client = publicClientFor(url);
  });
  afterAll(async () => {
    await devnet.close();
  });

  it("mines a JSON-RPC batch of transactions as one block in batch order, each call returning with its receipt", async () => {
    const senders = await fundedAccounts(url, 20);
    const sink = newAccount().address;
    // Tips of 1..20 gwei, so eth_feeHistory has a spread of rewards to report.
    const raws = await Promise.all(
      senders.map((sender, i) =>
        signTransfer(sender, sink, { maxPriorityFeePerGas: parseGwei(String(i + 1)) }),
      ),
    );
    const before = await client.getBlockNumber({ cacheTime: 0 });

    const answers = await rpcBatch(url, raws.map(send));
    const hashes = answers.map((answer) => answer.result as Hex);
    expect(answers.every((answer) => answer.error === undefined)).toBe(true);
    // Answered only once mined: every receipt is there without waiting.
    const receipts = await rpcBatch(
      url,
      hashes.map((hash) => ["eth_getTransactionReceipt", [hash]]),
    );
    expect(receipts.map((r) => (r.result as { transactionIndex: Hex } | null)?.transactionIndex)).toEqual(
      hashes.map((_, i) => `0x${i.toString(16)}`),
    );

    expect(await client.getBlockNumber({ cacheTime: 0 })).toBe(before + 1n);
    const mined = await expectExactBlock(client, before + 1n);
    expect(mined.hashes).toEqual(hashes);
    expect(await client.getBalance({ address: sink })).toBe(20_000n);

    const history = await client.getFeeHistory({
      blockCount: 1,
      blockNumber: before + 1n,
      rewardPercentiles: [0, 50, 100],
    });
    // geth's rule: tips sorted ascending, weighted by gas; 20 equal transfers put 50 % at the 10th.
    expect(history.reward).toEqual([[parseGwei("1"), parseGwei("10"), parseGwei("20")]]);
    expect(history.gasUsedRatio).toEqual([(20 * 21_000) / Number(BLOCK_GAS_LIMIT)]);
  });

  it("mines 50 concurrent senders and one sender's run of nonces in fewer blocks than transactions", async () => {
    const senders = await fundedAccounts(url, 50);
    const [serial] = await fundedAccounts(url, 1);
    const sink = newAccount().address;
    const raws = await Promise.all(senders.map((sender) => signTransfer(sender, sink)));
    const serialRaws = await Promise.all(
      [0, 1, 2, 3, 4].map((nonce) => signTransfer(serial!, sink, { nonce })),
    );
    const before = await client.getBlockNumber({ cacheTime: 0 });

    // Separate HTTP requests, all in flight at once. The client shares this process's event loop:
    // open its connections first, or it would write the requests one by one between blocks.
    await Promise.all(
      [...raws, ...serialRaws].map(() => client.getBalance({ address: newAccount().address })),
    );
    const hashes = await Promise.all(
      [...raws, ...serialRaws].map((raw) => client.sendRawTransaction({ serializedTransaction: raw })),
    );
    // A nonce that arrived ahead of its predecessor was queued and answered early: wait for it.
    const receipts = await Promise.all(hashes.map((hash) => client.waitForTransactionReceipt({ hash })));
    expect(receipts.every((receipt) => receipt.status === "success")).toBe(true);

    const blocks = [...new Set(receipts.map((receipt) => receipt.blockNumber))].sort();
    expect(blocks.length).toBeLessThan(receipts.length);
    expect(await client.getBlockNumber({ cacheTime: 0 })).toBe(before + BigInt(blocks.length));
    for (const number of blocks) await expectExactBlock(client, number);

    // The serial sender's transactions are mined in nonce order.
    const positions = receipts
      .slice(50)
      .map((receipt) => receipt.blockNumber * 1_000n + BigInt(receipt.transactionIndex));
    expect(positions).toEqual([...positions].sort((x, y) => (x < y ? -1 : 1)));
    expect(await client.getTransactionCount({ address: serial!.address })).toBe(5);
    expect(await client.getBalance({ address: sink })).toBe(55_000n);
  });

  it("mines a sender's transactions that arrive in one group out of nonce order in that block, in nonce order", async () => {
    const [sender] = await fundedAccounts(url, 1);
    const sink = newAccount().address;
    const raws = await Promise.all(
      Array.from({ length: 20 }, (_, nonce) => signTransfer(sender!, sink, { nonce })),
    );
    const before = await client.getBlockNumber({ cacheTime: 0 });

    // Each one ahead of its sender's nonce waits in the future queue until the one before it is in.
    const answers = await rpcBatch(url, [...raws].reverse().map(send));
    expect(answers.map((answer) => answer.error)).toEqual(Array(20).fill(undefined));
    expect(await client.getBlockNumber({ cacheTime: 0 })).toBe(before + 1n);
    const { receipts } = await expectExactBlock(client, before + 1n);
    expect(receipts.map((receipt) => receipt.transactionHash)).toEqual(raws.map((raw) => keccak256(raw)));
    expect(await client.getTransactionCount({ address: sender!.address })).toBe(20);
  });

  it("refuses a bad transaction alone, with geth's error, and mines the rest of its block", async () => {
    const [a, b, c, d, e] = await fundedAccounts(url, 5, usdc(1n));
    const sink = newAccount().address;
    const staleRaw = await signTransfer(c!, sink);
    await client.waitForTransactionReceipt({
      hash: await client.sendRawTransaction({ serializedTransaction: staleRaw }),
    });
    const gasCost = 21_000n * FEES.maxFeePerGas;
    const good = await signTransfer(a!, sink);
    // b's first transfer leaves too little for its second: the second is refused by the state
    // its own block has built so far.
    const spendAll = await signTransfer(b!, sink, { value: usdc(1n) - gasCost });
    const overdraw = await signTransfer(b!, sink, { nonce: 1 });
    const stale = await signTransfer(c!, sink, { value: 2n });
    const cheap = await signTransfer(d!, sink, { maxFeePerGas: 1n, maxPriorityFeePerGas: 1n });
    const alsoGood = await signTransfer(e!, sink);
    const before = await client.getBlockNumber({ cacheTime: 0 });

    const answers = await rpcBatch(url, [
      send(good),
      send(spendAll),
      send(overdraw),
      send(good),
      send(stale),
      send(cheap),
      send(alsoGood),
    ]);

    expect(answers[2]?.error).toMatchObject({
      code: -32000,
      message: expect.stringMatching(/^insufficient funds for gas \* price \+ value/),
    });
    expect(answers[3]?.error).toEqual({ code: -32000, message: "already known" });
    expect(answers[4]?.error).toEqual({ code: -32000, message: "nonce too low: next nonce 1, tx nonce 0" });
    expect(answers[5]?.error).toMatchObject({
      code: -32000,
      message: expect.stringMatching(/^max fee per gas less than block base fee/),
    });
    const minedHashes = [answers[0], answers[1], answers[6]].map((answer) => answer?.result as Hex);
    expect(await client.getBlockNumber({ cacheTime: 0 })).toBe(before + 1n);
    const mined = await expectExactBlock(client, before + 1n);
    expect(mined.hashes).toEqual(minedHashes);
    expect(mined.receipts.every((receipt) => receipt.status === "success")).toBe(true);
    expect(await client.getTransactionCount({ address: b!.address })).toBe(1);
    expect(await client.getTransactionCount({ address: d!.address })).toBe(0);
    // c's earlier transfer, a's, b's first and e's.
    expect(await client.getBalance({ address: sink })).toBe(3_000n + usdc(1n) - gasCost);
  });

  it("groups precompile settlements, numbering their AuthorizationUsed and Transfer logs across the block", async () => {
    const payers = await fundedAccounts(url, 4);
    const [relayer, other] = await fundedAccounts(url, 2);
    const payee = newAccount().address;
    const authorizations = await Promise.all(
      payers.map(async (payer, i) => {
        const auth = transferAuthorization(payer.address, payee, BigInt(i + 1) * 1_000n);
        return {
          auth,
          data: transferWithAuthorizationCalldata(auth, await signTransferAuthorization(payer, auth)),
        };
      }),
    );
    const submit = (from: PrivateKeyAccount, data: Hex, nonce: number): Promise<Hex> =>
      from.signTransaction({
        chainId: CHAIN_ID,
        type: "eip1559",
        to: NATIVE_TRANSFER_AUTH_ADDRESS,
        data,
        nonce,
        gas: 100_000n,
        ...FEES,
      });
    const raws = [
      await submit(relayer!, authorizations[0]!.data, 0),
      await submit(relayer!, authorizations[1]!.data, 1),
      // The same authorization again, from another relayer: it reverts as used, inside the block.
      await submit(other!, authorizations[1]!.data, 0),
      await submit(relayer!, authorizations[2]!.data, 2),
      await submit(relayer!, authorizations[3]!.data, 3),
    ];
    const before = await client.getBlockNumber({ cacheTime: 0 });

    const answers = await rpcBatch(url, raws.map(send));
    expect(answers.every((answer) => typeof answer.result === "string")).toBe(true);
    expect(await client.getBlockNumber({ cacheTime: 0 })).toBe(before + 1n);
    const { receipts } = await expectExactBlock(client, before + 1n);

    expect(receipts.map((receipt) => receipt.status)).toEqual([
      "success",
      "success",
      "reverted",
      "success",
      "success",
    ]);
    expect(receipts.map((receipt) => receipt.logs.map((log) => log.logIndex))).toEqual([
      [0, 1],
      [2, 3],
      [],
      [4, 5],
      [6, 7],
    ]);
    const logs = await client.getLogs({
      address: NATIVE_TRANSFER_AUTH_ADDRESS,
      fromBlock: before + 1n,
      toBlock: before + 1n,
    });
    const events = parseEventLogs({ abi: NATIVE_TRANSFER_AUTH_ABI, logs });
    expect(events.map((event) => [event.eventName, event.logIndex, event.transactionIndex])).toEqual([
      ["AuthorizationUsed", 0, 0],
      ["Transfer", 1, 0],
      ["AuthorizationUsed", 2, 1],
      ["Transfer", 3, 1],
      ["AuthorizationUsed", 4, 3],
      ["Transfer", 5, 3],
      ["AuthorizationUsed", 6, 4],
      ["Transfer", 7, 4],
    ]);
    expect(events[3]?.args).toEqual({ from: payers[1]!.address, to: payee, value: 2_000n });
    expect(
      (
        await rpcBatch(url, [
          ["eth_call", [{ to: NATIVE_TRANSFER_AUTH_ADDRESS, data: authorizations[1]!.data }]],
        ])
      )[0]?.error?.message,
    ).toBe(`execution reverted: ${REVERT_REASONS.used}`);
    expect(await client.getBalance({ address: payee })).toBe(
      (1_000n + 2_000n + 3_000n + 4_000n) * WEI_PER_UNIT,
    );
  });

  it("splits what waits into several blocks when the gas limit is reached; the base fee rises after a full block", async () => {
    const burners = await fundedAccounts(url, 4);
    const [plain] = await fundedAccounts(url, 1);
    const sink = newAccount().address;
    const burn = (from: PrivateKeyAccount): Promise<Hex> =>
      from.signTransaction({
        chainId: CHAIN_ID,
        type: "eip1559",
        data: BURN_ALL_GAS,
        nonce: 0,
        gas: 10_000_000n,
        ...FEES,
      });
    const raws = [
      await burn(burners[0]!),
      await burn(burners[1]!),
      await burn(burners[2]!),
      await signTransfer(plain!, sink, { nonce: 0 }),
      await burn(burners[3]!),
      await signTransfer(plain!, sink, { nonce: 1 }),
    ];
    const before = await client.getBlockNumber({ cacheTime: 0 });

    const answers = await rpcBatch(url, raws.map(send));
    expect(answers.every((answer) => typeof answer.result === "string")).toBe(true);
    expect(await client.getBlockNumber({ cacheTime: 0 })).toBe(before + 2n);
    const full = await expectExactBlock(client, before + 1n);
    const next = await expectExactBlock(client, before + 2n);
    // Three 10M burns fill the 30M block exactly; the rest, in order, make the next block.
    expect(full.hashes).toEqual(answers.slice(0, 3).map((answer) => answer.result));
    expect(full.receipts.map((receipt) => [receipt.status, receipt.gasUsed])).toEqual(
      Array(3).fill(["reverted", 10_000_000n]),
    );
    expect(next.hashes).toEqual(answers.slice(3).map((answer) => answer.result));
    const [fullBlock, nextBlock] = await Promise.all([
      client.getBlock({ blockNumber: before + 1n }),
      client.getBlock({ blockNumber: before + 2n }),
    ]);
    expect(fullBlock.gasUsed).toBe(BLOCK_GAS_LIMIT);
    // EIP-1559: a block at twice the target raises the next base fee by 1/8, and by at least 1 wei.
    const base = fullBlock.baseFeePerGas!;
    expect(nextBlock.baseFeePerGas).toBe(base + (base / 8n > 1n ? base / 8n : 1n));
  });

  it("answers latest from the head while transactions wait, and pending once they are mined", async () => {
    const [sender] = await fundedAccounts(url, 1);
    const sink = newAccount().address;
    const raws = await Promise.all([0, 1, 2].map((nonce) => signTransfer(sender!, sink, { nonce })));
    const hash = keccak256(raws[0]!);

    const answers = await rpcBatch(url, [
      ["eth_getTransactionCount", [sender!.address, "latest"]],
      send(raws[0]!),
      ["eth_getTransactionByHash", [hash]],
      ["eth_getTransactionReceipt", [hash]],
      send(raws[1]!),
      send(raws[2]!),
      ["eth_getTransactionCount", [sender!.address, "pending"]],
      ["eth_getTransactionCount", [sender!.address, "latest"]],
      ["eth_getBalance", [sink, "latest"]],
    ]);
    expect(answers.map((answer) => answer.error)).toEqual(Array(9).fill(undefined));
    // "latest" is the head block, as on any node: asked while the three waited for their block,
    // before it and after the sends alike, it saw none of them; "pending" waited for the block.
    expect(answers[0]?.result).toBe("0x0");
    expect(answers[7]?.result).toBe("0x0");
    expect(answers[8]?.result).toBe("0x0");
    expect(answers[6]?.result).toBe("0x3");
    // Once the sends have answered, the head holds them.
    expect(await client.getTransactionCount({ address: sender!.address, blockTag: "latest" })).toBe(3);
    expect(await client.getBalance({ address: sink })).toBe(3_000n);
    // History reads take no lock: asked while the transaction waited, they saw it pending.
    expect(answers[2]?.result).toMatchObject({
      hash,
      from: sender!.address.toLowerCase(),
      nonce: "0x0",
      blockNumber: null,
      blockHash: null,
      transactionIndex: null,
    });
    expect(answers[3]?.result).toBeNull();
    expect(answers[1]?.result).toBe(hash);
    expect(await client.getTransactionReceipt({ hash })).toMatchObject({
      status: "success",
      transactionIndex: 0,
    });
  });
});
