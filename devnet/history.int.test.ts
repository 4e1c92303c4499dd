import { access, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type Hex, keccak256, parseGwei, toHex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";
import { DEFAULT_RECENT_BLOCKS } from "./block-store.ts";
import { startDevnet } from "./index.ts";
import {
  fund,
  newAccount,
  rpc,
  rpcBatch,
  signTransferAuthorization,
  transferAuthorization,
  transferWithAuthorizationCalldata,
  usdc,
} from "./testing.ts";

const FEES = { maxFeePerGas: parseGwei("30"), maxPriorityFeePerGas: parseGwei("1") };

/** Every history answer a client can get about one mined settlement. */
async function historyAnswers(url: string, hash: Hex, blockNumber: Hex): Promise<unknown[]> {
  const answers = await rpcBatch(url, [
    ["eth_getTransactionByHash", [hash]],
    ["eth_getTransactionReceipt", [hash]],
    ["eth_getBlockByNumber", [blockNumber, true]],
    ["eth_getBlockByNumber", [blockNumber, false]],
    ["eth_getLogs", [{ fromBlock: "0x0", toBlock: "latest", address: NATIVE_TRANSFER_AUTH_ADDRESS }]],
    ["eth_getLogs", [{ fromBlock: blockNumber, toBlock: blockNumber }]],
  ]);
  const block = answers[2]?.result as { hash: Hex };
  const byHash = await rpc(url, "eth_getBlockByHash", [block.hash, true]);
  const logsByBlockHash = await rpc(url, "eth_getLogs", [{ blockHash: block.hash }]);
  return [...answers.map((answer) => answer.result), byHash.result, logsByBlockHash.result];
}

describe("devnet: blocks that left memory answer from the history file", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "devnet-history-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("old blocks, transactions, receipts and logs answer as when they were new, across a restart", async () => {
    const file = path.join(dir, "chain.json");
    const devnet = await startDevnet({ port: 0, stateFile: file });
    let restarted: Awaited<ReturnType<typeof startDevnet>> | undefined;
    try {
      const [payer, relayer] = [newAccount(), newAccount()];
      await fund(devnet.url, payer.address, usdc(10n));
      await fund(devnet.url, relayer.address, usdc(1n));
      const auth = transferAuthorization(payer.address, newAccount().address, 5_000n);
      const raw = await relayer.signTransaction({
        chainId: CHAIN_ID,
        type: "eip1559",
        to: NATIVE_TRANSFER_AUTH_ADDRESS,
        data: transferWithAuthorizationCalldata(auth, await signTransferAuthorization(payer, auth)),
        nonce: 0,
        gas: 100_000n,
        ...FEES,
      });
      expect((await rpc(devnet.url, "eth_sendRawTransaction", [raw])).result).toBe(keccak256(raw));
      const hash = keccak256(raw);
      const receipt = (await rpc(devnet.url, "eth_getTransactionReceipt", [hash])).result as {
        blockNumber: Hex;
        logs: unknown[];
      };
      expect(receipt.logs).toHaveLength(2);
      const whenNew = await historyAnswers(devnet.url, hash, receipt.blockNumber);

      // Enough blocks after it (dev_setBalance seals one each) to push it out of memory.
      const historyFile = `${file}.blocks.jsonl`;
      await expect(access(historyFile)).rejects.toThrow();
      const filler = newAccount().address;
      const calls = Array.from({ length: DEFAULT_RECENT_BLOCKS + 8 }, (_, i): [string, unknown[]] => [
        "dev_setBalance",
        [filler, toHex(i + 1)],
      ]);
      expect((await rpcBatch(devnet.url, calls)).every((answer) => answer.result === true)).toBe(true);
      await access(historyFile);

      expect(await historyAnswers(devnet.url, hash, receipt.blockNumber)).toEqual(whenNew);
      const resent = await rpc(devnet.url, "eth_sendRawTransaction", [raw]);
      expect(resent.error).toMatchObject({ message: "already known" });

      await devnet.close();
      restarted = await startDevnet({ port: 0, stateFile: file });
      expect(await historyAnswers(restarted.url, hash, receipt.blockNumber)).toEqual(whenNew);
    } finally {
      await devnet.close();
      await restarted?.close();
    }
  });
});
