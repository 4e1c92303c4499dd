import { MerklePatriciaTrie } from "@ethereumjs/mpt";
import { Caches, MerkleStateManager } from "@ethereumjs/statemanager";
import { Account, createAddressFromString, hexToBytes, ValueEncoding } from "@ethereumjs/util";
import { describe, expect, it } from "vitest";
import { createDevnetCommon } from "../chain/vm.ts";
import { StatePruner } from "./pruning.ts";

const CONTRACT = createAddressFromString(`0x${"c0".repeat(20)}`);
const CODE = hexToBytes("0x6001600055");
const slot = (i: number): Uint8Array => hexToBytes(`0x${i.toString(16).padStart(64, "0")}`);
const account = (i: number) => createAddressFromString(`0x${(i + 1).toString(16).padStart(40, "0")}`);

/** What block `b` of the test wrote: account i has balance b + i for i ≤ b; contract slot i holds b + 1. */
async function expectStateOfBlock(state: MerkleStateManager, b: number): Promise<void> {
  for (let i = 0; i <= b; i++) expect((await state.getAccount(account(i)))?.balance).toBe(BigInt(b + i));
  for (let i = 0; i <= b; i++)
    expect(await state.getStorage(CONTRACT, slot(i))).toEqual(Uint8Array.of(b + 1));
  expect(await state.getCode(CONTRACT)).toEqual(CODE);
}

describe("state pruning: the trie keeps the latest states only", () => {
  it("drops states older than the retained ones; the retained and the live state read whole, and writing goes on", async () => {
    const errors: Error[] = [];
    const pruner = new StatePruner({
      retainedStates: 3,
      minNodes: 1,
      onError: (error) => errors.push(error),
    });
    const common = createDevnetCommon();
    const trie = new MerklePatriciaTrie({
      useKeyHashing: true,
      common,
      db: pruner.nodes,
      valueEncoding: ValueEncoding.Bytes,
    });
    const state = new MerkleStateManager({ common, trie, caches: new Caches() });
    await state.putAccount(CONTRACT, new Account());
    await state.putCode(CONTRACT, CODE);

    const roots: Uint8Array[] = [];
    let largest = 0;
    for (let b = 0; b < 12; b++) {
      // One "block": every account and slot rewritten, so each block leaves old nodes behind.
      await state.checkpoint();
      for (let i = 0; i <= b; i++) {
        await state.putAccount(account(i), new Account(0n, BigInt(b + i)));
        await state.putStorage(CONTRACT, slot(i), Uint8Array.of(b + 1));
      }
      await state.commit();
      const root = await state.getStateRoot();
      roots.push(root);
      largest = Math.max(largest, pruner.nodes.map.size);
      pruner.noteBlock(root);
    }
    expect(errors).toEqual([]);
    expect(pruner.nodes.map.size).toBeLessThan(largest);

    await expectStateOfBlock(state, 11);
    for (const b of [9, 10, 11]) {
      const past = state.shallowCopy();
      await past.setStateRoot(roots[b]!);
      await expectStateOfBlock(past, b);
    }
    for (const b of [0, 5, 7]) expect(await state.hasStateRoot(roots[b]!)).toBe(false);

    // The storage trie the state manager cached before compaction writes to the compacted store.
    await state.putStorage(CONTRACT, slot(0), Uint8Array.of(99));
    const root = await state.getStateRoot();
    pruner.noteBlock(root);
    const fresh = new MerkleStateManager({ common, trie: trie.shallowCopy(false) });
    await fresh.setStateRoot(root);
    expect(await fresh.getStorage(CONTRACT, slot(0))).toEqual(Uint8Array.of(99));
    expect(await fresh.getStorage(CONTRACT, slot(11))).toEqual(Uint8Array.of(12));
    expect(await fresh.getCode(CONTRACT)).toEqual(CODE);
  });
});
