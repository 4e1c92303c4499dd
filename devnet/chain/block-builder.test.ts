/**
 * A block's transactions run inside one checkpoint of the state (block-builder.ts): their writes
 * reach the trie once, when the block is sealed, and a block that is not sealed leaves nothing.
 */
import { MerkleStateManager } from "@ethereumjs/statemanager";
import { createFeeMarket1559Tx } from "@ethereumjs/tx";
import { Account, type Address, bytesToHex, createAddressFromString, hexToBytes } from "@ethereumjs/util";
import { generatePrivateKey } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { CHAIN_ID } from "../../shared/constants.ts";
import { BlockBuilder } from "./block-builder.ts";
import { applyGenesisState } from "./genesis.ts";
import { genesisHeader } from "./miner.ts";
import { createDevnetCommon, createDevnetVm, type DevnetVm } from "./vm.ts";

const PAYEE = createAddressFromString(`0x${"be".repeat(20)}`);
const GWEI = 1_000_000_000n;

async function chainOf(senders: number) {
  const operatorPool = createAddressFromString(`0x${"0a".repeat(20)}`);
  const dvm = await createDevnetVm({
    operatorPool,
    blockHash: () => undefined,
    onPruningError: (error) => {
      throw error;
    },
  });
  await applyGenesisState(dvm.state, { operatorPool, operatorPoolBalanceWei: 1n });
  const keys = Array.from({ length: senders }, () => hexToBytes(generatePrivateKey()));
  const transfers = keys.map((key) =>
    createFeeMarket1559Tx(
      {
        chainId: BigInt(CHAIN_ID),
        nonce: 0n,
        gasLimit: 21_000n,
        maxFeePerGas: 30n * GWEI,
        maxPriorityFeePerGas: GWEI,
        to: PAYEE,
        value: 1_000n,
      },
      { common: dvm.common },
    ).sign(key),
  );
  for (const tx of transfers) await dvm.state.putAccount(tx.getSenderAddress(), new Account(0n, 10n ** 18n));
  const genesis = genesisHeader(dvm.common, await dvm.state.getStateRoot(), 1n);
  return { dvm, genesis, transfers };
}

/** The root of a trie holding nothing but `dvm`'s whole state, written afresh. */
async function freshRootOf(dvm: DevnetVm): Promise<string> {
  // ethereumjs's own default: a key-hashing trie in memory, no caches.
  const fresh = new MerkleStateManager({ common: createDevnetCommon() });
  for (const entry of await dvm.state.dump()) {
    const address = createAddressFromString(entry.address);
    await fresh.putAccount(address, new Account(entry.nonce, entry.balance));
    if (entry.code.length > 0) await fresh.putCode(address, entry.code);
    for (const [key, value] of entry.storage) await fresh.putStorage(address, key, value);
  }
  return bytesToHex(await fresh.getStateRoot());
}

const balanceOf = async (dvm: DevnetVm, address: Address): Promise<bigint | undefined> =>
  (await dvm.state.getAccount(address))?.balance;

describe("a block being built", () => {
  it("writes nothing to the trie until it is sealed, then seals the root the whole state gives", async () => {
    const { dvm, genesis, transfers } = await chainOf(5);
    const nodesBefore = dvm.pruner.nodes.map.size;

    const builder = new BlockBuilder(dvm, genesis, 2n);
    for (const tx of transfers) expect((await builder.add(tx, tx.getSenderAddress())).ok).toBe(true);
    // Five transactions paid one payee and one coinbase: per transaction, each would have been
    // written through to the trie (and its path hashed) once more.
    expect(dvm.pruner.nodes.map.size).toBe(nodesBefore);
    expect(await balanceOf(dvm, PAYEE)).toBe(5_000n);

    const { header } = await builder.seal();
    expect(dvm.pruner.nodes.map.size).toBeGreaterThan(nodesBefore);
    expect(bytesToHex(header.stateRoot)).toBe(await freshRootOf(dvm));
    expect(bytesToHex(header.stateRoot)).not.toBe(bytesToHex(genesis.stateRoot));
  });

  it("keeps the block's other transactions when the EVM refuses one inside it", async () => {
    const { dvm, transfers } = await chainOf(3);
    // A sender with code: runTx refuses its transaction outright (EIP-3607), inside the block.
    const refused = transfers[1]!.getSenderAddress();
    await dvm.state.putCode(refused, Uint8Array.of(0x00));
    const parent = genesisHeader(dvm.common, await dvm.state.getStateRoot(), 1n);

    const builder = new BlockBuilder(dvm, parent, 2n);
    const outcomes = [];
    for (const tx of transfers) outcomes.push(await builder.add(tx, tx.getSenderAddress()));
    expect(outcomes.map((outcome) => outcome.ok)).toEqual([true, false, true]);
    expect(outcomes[1]).toMatchObject({ error: expect.stringContaining("EIP-3607") });
    const { header } = await builder.seal();
    expect(bytesToHex(header.stateRoot)).toBe(await freshRootOf(dvm));
    expect(await balanceOf(dvm, PAYEE)).toBe(2_000n);
    expect((await dvm.state.getAccount(refused))?.nonce).toBe(0n);
  });

  it("takes back what an abandoned block ran, and the next block seals as if it never had", async () => {
    const { dvm, genesis, transfers } = await chainOf(3);
    const abandoned = new BlockBuilder(dvm, genesis, 2n);
    for (const tx of transfers.slice(0, 2)) await abandoned.add(tx, tx.getSenderAddress());
    await abandoned.abandon();
    expect(await balanceOf(dvm, PAYEE)).toBeUndefined();
    expect((await dvm.state.getAccount(transfers[0]!.getSenderAddress()))?.nonce).toBe(0n);
    expect(bytesToHex(await dvm.state.getStateRoot())).toBe(bytesToHex(genesis.stateRoot));

    const next = new BlockBuilder(dvm, genesis, 2n);
    expect((await next.add(transfers[2]!, transfers[2]!.getSenderAddress())).ok).toBe(true);
    const { header } = await next.seal();
    expect(bytesToHex(header.stateRoot)).toBe(await freshRootOf(dvm));
    // The checkpoint closed with the seal: the head's state, read from the trie alone, has the block.
    const view = dvm.state.shallowCopy();
    await view.setStateRoot(header.stateRoot);
    expect((await view.getAccount(PAYEE))?.balance).toBe(1_000n);
    expect((await view.getAccount(transfers[0]!.getSenderAddress()))?.nonce).toBe(0n);
  });
});
