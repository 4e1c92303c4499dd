import { access, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type Hex, keccak256, toHex } from "viem";
import { describe, expect, it } from "vitest";
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../../shared/constants.ts";
import { DEFAULT_RECENT_BLOCKS } from "../chain/block-store.ts";
import { startDevnet } from "../index.ts";
import {
  fund,
  newAccount,
  rpc,
  rpcBatch,
  signTransferAuthorization,
  transferAuthorization,
  transferWithAuthorizationCalldata,
  usdc,
  walletClientFor,
} from "../testing.ts";

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
  it("old blocks, transactions, receipts and logs answer as when they were new, across a restart", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "devnet-history-"));
    const file = path.join(dir, "chain.json");
    const devnet = await startDevnet({ port: 0, stateFile: file });
    let restarted: Awaited<ReturnType<typeof startDevnet>> | undefined;
    try {
      const [payer, relayer] = [newAccount(), newAccount()];
      await fund(devnet.url, payer.address, usdc(10n));
      await fund(devnet.url, relayer.address, usdc(1n));
      // A settlement, signed as a client would sign it, kept raw to send it again later.
      const auth = transferAuthorization(payer.address, newAccount().address, 5_000n);
      const wallet = walletClientFor(devnet.url, relayer);
      const raw = await wallet.signTransaction(
        await wallet.prepareTransactionRequest({
          to: NATIVE_TRANSFER_AUTH_ADDRESS,
          data: transferWithAuthorizationCalldata(auth, await signTransferAuthorization(payer, auth)),
        }),
      );
      const hash = keccak256(raw);
      expect((await rpc(devnet.url, "eth_sendRawTransaction", [raw])).result).toBe(hash);
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
      // A mined transaction sent again: geth's pool has let it go, so its nonce is too low.
      expect(resent.error).toMatchObject({ message: expect.stringMatching(/^nonce too low/) });

      await devnet.close();
      restarted = await startDevnet({ port: 0, stateFile: file });
      expect(await historyAnswers(restarted.url, hash, receipt.blockNumber)).toEqual(whenNew);
    } finally {
      await devnet.close();
      await restarted?.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
