import { genTransactionsTrieRoot } from "@ethereumjs/block";
import { createCustomCommon, Hardfork, Mainnet } from "@ethereumjs/common";
import { createFeeMarket1559Tx } from "@ethereumjs/tx";
import { bytesToHex, createAddressFromString, hexToBytes } from "@ethereumjs/util";
import { describe, expect, it } from "vitest";
import { singleItemTrieRoot } from "./trie-root.ts";

describe("singleItemTrieRoot", () => {
  it("matches the transactions trie ethereumjs builds for a one-transaction block", async () => {
    const common = createCustomCommon({ chainId: 77 }, Mainnet, { hardfork: Hardfork.Cancun });
    const tx = createFeeMarket1559Tx(
      {
        nonce: 3n,
        to: createAddressFromString("0x1111111111111111111111111111111111111111"),
        value: 5n,
        gasLimit: 21_000n,
        maxFeePerGas: 10n,
        maxPriorityFeePerGas: 1n,
      },
      { common },
    ).sign(hexToBytes(`0x${"42".repeat(32)}`));
    const expected = await genTransactionsTrieRoot([tx]);
    expect(bytesToHex(singleItemTrieRoot(tx.serialize()))).toBe(bytesToHex(expected));
  });
});
