/**
 * A pass-through state manager that remembers every account and storage slot ever written, so
 * the state file can list the whole state. The Merkle trie underneath keys accounts and slots by
 * their keccak hashes and keeps no preimages, so it cannot be enumerated by itself.
 */
import type { AccountFields, StateManagerInterface, StorageDump, StorageRange } from "@ethereumjs/common";
import { Account, type Address, bytesToHex, createAddressFromString, hexToBytes } from "@ethereumjs/util";
import type { Hex } from "../hex.ts";

export type AccountDump = {
  address: Hex;
  nonce: bigint;
  balance: bigint;
  code: Uint8Array;
  /** Non-zero slots only, as [slot, value] with the value's leading zeros stripped. */
  storage: Array<[Uint8Array, Uint8Array]>;
};

export class TrackingStateManager implements StateManagerInterface {
  readonly #inner: StateManagerInterface;
  /** Lowercase 0x address → the slots written under it (lowercase 0x, 32 bytes). */
  readonly #written = new Map<string, Set<Hex>>();

  constructor(inner: StateManagerInterface) {
    this.#inner = inner;
  }

  get originalStorageCache(): StateManagerInterface["originalStorageCache"] {
    return this.#inner.originalStorageCache;
  }

  getAccount(address: Address): Promise<Account | undefined> {
    return this.#inner.getAccount(address);
  }

  putAccount(address: Address, account?: Account): Promise<void> {
    this.#slotsOf(address);
    return this.#inner.putAccount(address, account);
  }

  deleteAccount(address: Address): Promise<void> {
    return this.#inner.deleteAccount(address);
  }

  modifyAccountFields(address: Address, accountFields: AccountFields): Promise<void> {
    this.#slotsOf(address);
    return this.#inner.modifyAccountFields(address, accountFields);
  }

  putCode(address: Address, value: Uint8Array): Promise<void> {
    this.#slotsOf(address);
    return this.#inner.putCode(address, value);
  }

  getCode(address: Address): Promise<Uint8Array> {
    return this.#inner.getCode(address);
  }

  getCodeSize(address: Address): Promise<number> {
    return this.#inner.getCodeSize(address);
  }

  getStorage(address: Address, key: Uint8Array): Promise<Uint8Array> {
    return this.#inner.getStorage(address, key);
  }

  putStorage(address: Address, key: Uint8Array, value: Uint8Array): Promise<void> {
    this.#slotsOf(address).add(bytesToHex(key));
    return this.#inner.putStorage(address, key, value);
  }

  clearStorage(address: Address): Promise<void> {
    return this.#inner.clearStorage(address);
  }

  checkpoint(): Promise<void> {
    return this.#inner.checkpoint();
  }

  commit(): Promise<void> {
    return this.#inner.commit();
  }

  revert(): Promise<void> {
    return this.#inner.revert();
  }

  getStateRoot(): Promise<Uint8Array> {
    return this.#inner.getStateRoot();
  }

  setStateRoot(stateRoot: Uint8Array, clearCache?: boolean): Promise<void> {
    return this.#inner.setStateRoot(stateRoot, clearCache);
  }

  hasStateRoot(root: Uint8Array): Promise<boolean> {
    return this.#inner.hasStateRoot(root);
  }

  dumpStorage(address: Address): Promise<StorageDump> {
    if (this.#inner.dumpStorage === undefined) throw new Error("inner state manager cannot dump storage");
    return this.#inner.dumpStorage(address);
  }

  dumpStorageRange(address: Address, startKey: bigint, limit: number): Promise<StorageRange> {
    if (this.#inner.dumpStorageRange === undefined)
      throw new Error("inner state manager cannot dump storage");
    return this.#inner.dumpStorageRange(address, startKey, limit);
  }

  getAppliedKey(address: Uint8Array): Uint8Array {
    if (this.#inner.getAppliedKey === undefined) throw new Error("inner state manager has no applied keys");
    return this.#inner.getAppliedKey(address);
  }

  clearCaches(): void {
    this.#inner.clearCaches();
  }

  /** An untracked copy (historical reads set it to an older root; it never writes). */
  shallowCopy(downlevelCaches?: boolean): StateManagerInterface {
    return this.#inner.shallowCopy(downlevelCaches);
  }

  /** Every live account with its code and non-zero storage. Call with no checkpoint open. */
  async dump(): Promise<AccountDump[]> {
    const accounts: AccountDump[] = [];
    for (const [hex, slots] of this.#written) {
      const address = createAddressFromString(hex);
      const account = await this.#inner.getAccount(address);
      if (account === undefined) continue;
      const storage: Array<[Uint8Array, Uint8Array]> = [];
      for (const slot of slots) {
        const key = hexToBytes(slot);
        const value = await this.#inner.getStorage(address, key);
        if (value.some((byte) => byte !== 0)) storage.push([key, value]);
      }
      const code = account.isContract() ? await this.#inner.getCode(address) : new Uint8Array(0);
      accounts.push({ address: hex as Hex, nonce: account.nonce, balance: account.balance, code, storage });
    }
    return accounts;
  }

  /** Writes dumped accounts back: the account first, since code and storage attach to it. */
  async restore(accounts: readonly AccountDump[]): Promise<void> {
    for (const entry of accounts) {
      const address = createAddressFromString(entry.address);
      await this.putAccount(address, new Account(entry.nonce, entry.balance));
      if (entry.code.length > 0) await this.putCode(address, entry.code);
      for (const [key, value] of entry.storage) await this.putStorage(address, key, value);
    }
  }

  #slotsOf(address: Address): Set<Hex> {
    const key = address.toString();
    let slots = this.#written.get(key);
    if (slots === undefined) {
      slots = new Set();
      this.#written.set(key, slots);
    }
    return slots;
  }
}
