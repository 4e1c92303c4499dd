import { genTransactionsTrieRoot } from "@ethereumjs/block";
import { createCustomCommon, Hardfork, Mainnet } from "@ethereumjs/common";
import { createFeeMarket1559Tx, type TypedTransaction } from "@ethereumjs/tx";
import { bytesToHex, createAddressFromString, hexToBytes } from "@ethereumjs/util";
import { describe, expect, it } from "vitest";
import { orderedTrieRoot } from "./trie-root.ts";

/**
 * ethereumjs's own ordered trie (genTransactionsTrieRoot puts rlp(i) → serialize() into a
 * MerklePatriciaTrie), fed arbitrary values: the reference our one-pass builder must match.
 */
function referenceRoot(values: Uint8Array[]): Promise<Uint8Array> {
  return genTransactionsTrieRoot(
    values.map((value) => ({ serialize: () => value })) as unknown as TypedTransaction[],
  );
}

function pseudoRandomBytes(seed: number, length: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed * 2_654_435_761 + 1;
  for (let i = 0; i < length; i++) {
    x = (x * 1_103_515_245 + 12_345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

describe("orderedTrieRoot", () => {
  it("matches the transactions trie ethereumjs builds for signed transactions", async () => {
    const common = createCustomCommon({ chainId: 77 }, Mainnet, { hardfork: Hardfork.Cancun });
    const txs = Array.from({ length: 20 }, (_, nonce) =>
      createFeeMarket1559Tx(
        {
          nonce: BigInt(nonce),
          to: createAddressFromString("0x1111111111111111111111111111111111111111"),
          value: 5n,
          gasLimit: 21_000n,
          maxFeePerGas: 10n,
          maxPriorityFeePerGas: 1n,
        },
        { common },
      ).sign(hexToBytes(`0x${"42".repeat(32)}`)),
    );
    for (const count of [1, 2, 20]) {
      const some = txs.slice(0, count);
      expect(bytesToHex(orderedTrieRoot(some.map((tx) => tx.serialize())))).toBe(
        bytesToHex(await genTransactionsTrieRoot(some)),
      );
    }
  });

  it("matches ethereumjs across branch, extension and inline-node shapes", async () => {
    // 0: the empty root; 16, 17, 127, 128, 129, 256: where rlp(i) changes length or nibble
    // spreads change; 130 and 145: one-nibble extensions (0x8180 and 0x8181 share only the 8);
    // short values make nodes inlined in their parent, and 27 to 30 bytes put
    // some encodings right at the 32-byte boundary between inlined and hashed.
    for (const count of [0, 1, 2, 3, 15, 16, 17, 127, 128, 129, 130, 145, 200, 256, 300]) {
      for (const length of [1, 8, 27, 28, 29, 30, 40, 200]) {
        const values = Array.from({ length: count }, (_, i) => pseudoRandomBytes(i + length, length));
        expect(bytesToHex(orderedTrieRoot(values)), `${count} values of ${length} bytes`).toBe(
          bytesToHex(await referenceRoot(values)),
        );
      }
    }
  });
});
