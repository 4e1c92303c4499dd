import buffer from "node:buffer";
import { mkdtemp, open, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type Hex, parseGwei, toHex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../../shared/constants.ts";
import { DEV_OPERATOR_POOL_ADDRESS, NATIVE_TRANSFER_AUTH_ABI, startDevnet } from "../index.ts";
import {
  fund,
  newAccount,
  publicClientFor,
  rpc,
  rpcBatch,
  signTransferAuthorization,
  transferAuthorization,
  transferWithAuthorizationCalldata,
  usdc,
  walletClientFor,
} from "../testing.ts";
import { recomputeBlock } from "../testing-blocks.ts";
import { STATE_FILE_FORMAT } from "./state-file.ts";

/** Init code of a contract that stores 42 in slot 1 and whose runtime code is a single STOP. */
const STORAGE_CONTRACT: Hex = "0x602a60015560016000f3";

describe("devnet: --state FILE keeps the chain across restarts", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "devnet-state-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("restores balances, nonces, used authorizations, contract storage and history", async () => {
    const file = path.join(dir, "nested", "chain.json");
    const alice = newAccount();
    const bob = newAccount();
    const relayer = newAccount();

    const first = await startDevnet({ port: 0, stateFile: file });
    const client1 = publicClientFor(first.url);
    await fund(first.url, alice.address, usdc(10n));
    await fund(first.url, relayer.address, usdc(1n));
    const transferHash = await walletClientFor(first.url, alice).sendTransaction({
      to: bob.address,
      value: 1_000n,
    });
    await client1.waitForTransactionReceipt({ hash: transferHash });

    const auth = transferAuthorization(alice.address, bob.address, 25_000n);
    const authorization = transferWithAuthorizationCalldata(
      auth,
      await signTransferAuthorization(alice, auth),
    );
    const settleHash = await walletClientFor(first.url, relayer).sendTransaction({
      to: NATIVE_TRANSFER_AUTH_ADDRESS,
      data: authorization,
    });
    expect((await client1.waitForTransactionReceipt({ hash: settleHash })).status).toBe("success");

    const deployHash = await walletClientFor(first.url, relayer).sendTransaction({ data: STORAGE_CONTRACT });
    const contract = (await client1.waitForTransactionReceipt({ hash: deployHash })).contractAddress!;
    expect(await client1.getStorageAt({ address: contract, slot: "0x1" })).toBe(toHex(42, { size: 32 }));

    const before = {
      height: await client1.getBlockNumber(),
      head: await client1.getBlock(),
      alice: await client1.getBalance({ address: alice.address }),
      bob: await client1.getBalance({ address: bob.address }),
      relayer: await client1.getBalance({ address: relayer.address }),
      pool: await client1.getBalance({ address: DEV_OPERATOR_POOL_ADDRESS }),
      aliceNonce: await client1.getTransactionCount({ address: alice.address }),
    };
    await first.close();

    const saved = JSON.parse(await readFile(file, "utf8")) as { format: string; blocks: unknown[] };
    expect(saved.format).toBe(STATE_FILE_FORMAT);
    expect(saved.blocks).toHaveLength(Number(before.height) + 1);
    expect((await readdir(path.dirname(file))).filter((name) => name.endsWith(".tmp"))).toEqual([]);

    const second = await startDevnet({ port: 0, stateFile: file });
    try {
      const client2 = publicClientFor(second.url);
      expect(await client2.getBlockNumber()).toBe(before.height);
      expect((await client2.getBlock()).hash).toBe(before.head.hash);
      expect(await client2.getBalance({ address: alice.address })).toBe(before.alice);
      expect(await client2.getBalance({ address: bob.address })).toBe(before.bob);
      expect(await client2.getBalance({ address: bob.address })).toBe(1_000n + 25_000n * WEI_PER_UNIT);
      expect(await client2.getBalance({ address: relayer.address })).toBe(before.relayer);
      expect(await client2.getBalance({ address: DEV_OPERATOR_POOL_ADDRESS })).toBe(before.pool);
      expect(await client2.getTransactionCount({ address: alice.address })).toBe(before.aliceNonce);
      expect(await client2.getCode({ address: NATIVE_TRANSFER_AUTH_ADDRESS })).toBe("0xfe");
      expect(await client2.getCode({ address: contract })).toBe("0x00");
      expect(await client2.getStorageAt({ address: contract, slot: "0x1" })).toBe(toHex(42, { size: 32 }));
      expect((await client2.getTransactionReceipt({ hash: settleHash })).status).toBe("success");
      expect((await client2.getTransaction({ hash: transferHash })).value).toBe(1_000n);
      expect(
        await client2.readContract({
          address: NATIVE_TRANSFER_AUTH_ADDRESS,
          abi: NATIVE_TRANSFER_AUTH_ABI,
          functionName: "authorizationState",
          args: [alice.address, auth.nonce],
        }),
      ).toBe(true);
      const replay = await rpc(second.url, "eth_call", [
        { to: NATIVE_TRANSFER_AUTH_ADDRESS, data: authorization },
      ]);
      expect(replay.error).toMatchObject({ code: 3 });

      // The chain carries on from where it stopped.
      const nextHash = await walletClientFor(second.url, alice).sendTransaction({
        to: bob.address,
        value: 1n,
      });
      const next = await client2.waitForTransactionReceipt({ hash: nextHash });
      expect(next.blockNumber).toBe(before.height + 1n);
      expect((await client2.getBlock({ blockNumber: next.blockNumber })).parentHash).toBe(before.head.hash);
      expect((await client2.getTransaction({ hash: nextHash })).nonce).toBe(before.aliceNonce);
    } finally {
      await second.close();
    }
  });

  it("keeps blocks of several transactions: every header re-hashes, roots and receipts survive, the chain goes on", async () => {
    const file = path.join(dir, "grouped.json");
    const senders = Array.from({ length: 4 }, () => newAccount());
    const payer = newAccount();
    const sink = newAccount().address;
    const transfer = (sender: (typeof senders)[number], nonce: number): Promise<Hex> =>
      sender.signTransaction({
        chainId: CHAIN_ID,
        type: "eip1559",
        to: sink,
        value: 1_000n,
        nonce,
        gas: 21_000n,
        maxFeePerGas: parseGwei("30"),
        maxPriorityFeePerGas: parseGwei("1"),
      });
    const auth = transferAuthorization(payer.address, sink, 7_000n);
    const settle = await senders[0]!.signTransaction({
      chainId: CHAIN_ID,
      type: "eip1559",
      to: NATIVE_TRANSFER_AUTH_ADDRESS,
      data: transferWithAuthorizationCalldata(auth, await signTransferAuthorization(payer, auth)),
      nonce: 1,
      gas: 100_000n,
      maxFeePerGas: parseGwei("30"),
      maxPriorityFeePerGas: parseGwei("1"),
    });

    const first = await startDevnet({ port: 0, stateFile: file });
    await rpcBatch(
      first.url,
      [...senders, payer].map((account) => ["dev_setBalance", [account.address, toHex(usdc(10n))]]),
    );
    const sent = await rpcBatch(first.url, [
      ...(await Promise.all(senders.map((sender) => transfer(sender, 0)))).map((raw): [string, unknown[]] => [
        "eth_sendRawTransaction",
        [raw],
      ]),
      ["eth_sendRawTransaction", [settle]],
    ]);
    const hashes = sent.map((answer) => answer.result as Hex);
    const client1 = publicClientFor(first.url);
    const grouped = await client1.getBlock({ blockTag: "latest", includeTransactions: true });
    expect(grouped.transactions.map((tx) => tx.hash)).toEqual(hashes);
    const receiptsBefore = await Promise.all(hashes.map((hash) => client1.getTransactionReceipt({ hash })));
    await first.close();

    const second = await startDevnet({ port: 0, stateFile: file });
    try {
      const client2 = publicClientFor(second.url);
      const height = await client2.getBlockNumber({ cacheTime: 0 });
      expect(height).toBe(grouped.number);
      for (let number = 0n; number <= height; number++) {
        const block = await client2.getBlock({ blockNumber: number, includeTransactions: true });
        const receipts = await Promise.all(
          block.transactions.map((tx) => client2.getTransactionReceipt({ hash: tx.hash })),
        );
        const recomputed = await recomputeBlock(block, receipts);
        expect(recomputed.hash, `block ${number}`).toBe(block.hash);
        expect(recomputed.transactionsRoot).toBe(block.transactionsRoot);
        expect(recomputed.receiptsRoot).toBe(block.receiptsRoot);
        expect(recomputed.logsBloom).toBe(block.logsBloom);
      }
      expect(await client2.getBlock({ blockNumber: grouped.number, includeTransactions: true })).toEqual(
        grouped,
      );
      expect(await Promise.all(hashes.map((hash) => client2.getTransactionReceipt({ hash })))).toEqual(
        receiptsBefore,
      );
      expect(receiptsBefore[4]?.logs.map((log) => log.logIndex)).toEqual([0, 1]);

      // The chain carries on with another grouped block on top of the restored head.
      const more = await rpcBatch(
        second.url,
        (await Promise.all(senders.slice(1).map((sender) => transfer(sender, 1)))).map((raw) => [
          "eth_sendRawTransaction",
          [raw],
        ]),
      );
      const next = await client2.getBlock({ blockTag: "latest" });
      expect(next.number).toBe(grouped.number! + 1n);
      expect(next.parentHash).toBe(grouped.hash);
      expect(next.transactions).toEqual(more.map((answer) => answer.result));
      expect(await client2.getBalance({ address: sink })).toBe(7_000n + 7_000n * WEI_PER_UNIT);
    } finally {
      await second.close();
    }
  });

  // Writes, reads and writes again some 600 MB (25 s and 2.3 GB of memory on a quiet machine), so
  // it runs on request: DEVNET_LARGE_STATE=1 (docs/development.md).
  it.runIf(process.env.DEVNET_LARGE_STATE === "1")(
    "restarts from a file larger than the longest string V8 can hold",
    async () => {
      // Mutation: the file read as one string fails (RangeError: Invalid string length) and the
      // devnet does not start: the history of about 100,000 settlements (some 5 kB each in the
      // file) on a long-running `npm start` would lock its chain out.
      const file = path.join(dir, "large.json");
      const account = newAccount();
      const first = await startDevnet({ port: 0, stateFile: file });
      for (let i = 1n; i <= 12n; i++) await fund(first.url, account.address, i);
      await first.close();
      // The history grown large, made quickly: every block before the head carries 48 MB more.
      // (The head hashes to its stored hash and is left alone; older blocks are not re-hashed.)
      const saved = JSON.parse(await readFile(file, "utf8")) as { blocks: Array<Record<string, unknown>> };
      const blocks = saved.blocks;
      const padding = "0".repeat(48 * 1024 * 1024);
      const handle = await open(file, "w");
      try {
        const head = JSON.stringify({ ...saved, blocks: [] });
        await handle.write(`${head.slice(0, -"[]}".length)}[`);
        for (const [i, block] of blocks.entries()) {
          const padded = i < blocks.length - 1 ? { ...block, padding } : block;
          await handle.write(`${i === 0 ? "" : ","}${JSON.stringify(padded)}`);
        }
        await handle.write("]}");
      } finally {
        await handle.close();
      }
      expect((await stat(file)).size).toBeGreaterThan(buffer.constants.MAX_STRING_LENGTH);

      const second = await startDevnet({ port: 0, stateFile: file });
      try {
        const client = publicClientFor(second.url);
        expect(await client.getBlockNumber()).toBe(12n);
        expect(await client.getBalance({ address: account.address })).toBe(12n);
        expect((await client.getBlock({ blockNumber: 12n })).hash).toBe(
          (blocks[12]!.header as { hash: Hex }).hash,
        );
      } finally {
        await second.close();
      }
    },
    120_000,
  );

  it("starts from genesis when the file does not exist yet, and refuses another operator pool", async () => {
    const file = path.join(dir, "fresh.json");
    const devnet = await startDevnet({ port: 0, stateFile: file });
    expect(await publicClientFor(devnet.url).getBlockNumber()).toBe(0n);
    await devnet.close();
    await expect(
      startDevnet({ port: 0, stateFile: file, operatorPool: newAccount().address }),
    ).rejects.toThrow(/operator pool/);
  });
});
