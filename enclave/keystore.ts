/**
 * The keystore: secp256k1 keys in namespaces, sealed at rest with
 * AES-256-GCM. Keys are written as immutable key-set files (one per generated batch or restore),
 * each replaced atomically, so a crash never leaves half a key or half a batch. Decrypted keys live
 * only in this process's memory; nothing here ever returns a private key to a caller.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import type { Address } from "viem";
import { checksumAddress } from "../shared/address.ts";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import { type Hex, toHex } from "../shared/hex.ts";
import { err, ok, type Result } from "../shared/result.ts";
import { addressOfPublicKey, publicKeyOf, randomPrivateKeys } from "../shared/secp256k1.ts";
import { isTempFile, writeFileAtomic } from "./atomic-file.ts";
import { keySetRecordSchema } from "./key-set-record.ts";
import { SEAL_LABEL, SealError, seal, unseal } from "./sealing.ts";

export type KeyMaterial = {
  keyRef: string;
  privateKey: Uint8Array;
  publicKey: Uint8Array;
  publicKeyHex: Hex;
  address: Address;
};

export type KeyEntry = KeyMaterial & { namespace: string; batchId: string };

export type AddKeySetParams = { namespace: string; batchId: string; keys: KeyMaterial[] };

/** The batch's entries and how many of them were written now, or why nothing was. */
export type RestoreOutcome = Result<{ entries: KeyEntry[]; imported: number }, string>;

export class Keystore {
  private readonly byRef = new Map<string, KeyEntry>();
  /** Namespaces holding a key of each (lowercase) address: sign_faucet pays agent keys only. */
  private readonly namespacesByAddress = new Map<string, Set<string>>();
  private readonly byBatch = new Map<string, { namespace: string; keys: KeyEntry[] }>();
  /** Batches being written, so two concurrent generate_keys cannot both claim one batch id. */
  private readonly writing = new Set<string>();

  private constructor(
    private readonly keysDir: string,
    private readonly sealingKey: Uint8Array,
  ) {}

  /** Loads every sealed key set under `keysDir`; a blob that does not unseal stops the enclave. */
  static async open(keysDir: string, sealingKey: Uint8Array, logger: Logger): Promise<Keystore> {
    await mkdir(keysDir, { recursive: true, mode: 0o700 });
    const store = new Keystore(keysDir, sealingKey);
    const names = (await readdir(keysDir)).sort();
    for (const name of names) {
      if (isTempFile(name)) {
        // Leftover of a write interrupted before its rename: never a committed key set.
        await rm(join(keysDir, name), { force: true });
        continue;
      }
      if (!name.endsWith(".sealed")) continue;
      const blob = new Uint8Array(await readFile(join(keysDir, name)));
      const record = keySetRecordSchema.safeParse(decodeCbor(unseal(sealingKey, SEAL_LABEL.keySet, blob)));
      if (!record.success) throw new SealError(`key set ${name} does not parse`);
      store.index({
        namespace: record.data.namespace,
        batchId: record.data.batch_id,
        keys: record.data.keys.map((key) => ({
          keyRef: key.key_ref,
          privateKey: key.private_key,
          publicKey: key.public_key,
          publicKeyHex: toHex(key.public_key),
          address: checksumAddress(key.address),
        })),
      });
    }
    logger.info({ keys: store.byRef.size, batches: store.byBatch.size }, "keystore loaded");
    return store;
  }

  /** The key behind `keyRef`, if any. */
  get(keyRef: string): KeyEntry | undefined {
    return this.byRef.get(keyRef);
  }

  /** True when this keystore holds a key of `namespace` whose address is `address`. */
  holdsAddress(namespace: string, address: string): boolean {
    return this.namespacesByAddress.get(address.toLowerCase())?.has(namespace) ?? false;
  }

  /** The keys of a batch (generated here or restored from a backup). */
  batch(batchId: string): { namespace: string; keys: KeyEntry[] } | undefined {
    return this.byBatch.get(batchId);
  }

  /** True while a key set for `batchId` is being written. */
  isWriting(batchId: string): boolean {
    return this.writing.has(batchId);
  }

  /** Number of keys held (for logs and tests). */
  get size(): number {
    return this.byRef.size;
  }

  /** Seals and durably writes one key set, then makes its keys usable. */
  async add(params: AddKeySetParams): Promise<KeyEntry[]> {
    for (const key of params.keys) {
      if (this.byRef.has(key.keyRef)) throw new Error("key_ref collision");
    }
    const record = {
      v: 1,
      namespace: params.namespace,
      batch_id: params.batchId,
      created_at: new Date().toISOString(),
      keys: params.keys.map((key) => ({
        key_ref: key.keyRef,
        private_key: key.privateKey,
        public_key: key.publicKey,
        address: key.address,
      })),
    };
    const blob = seal(this.sealingKey, SEAL_LABEL.keySet, encodeCbor(record));
    const fileName = `${Date.now().toString().padStart(14, "0")}-${randomBytes(8).toString("hex")}.sealed`;
    this.writing.add(params.batchId);
    try {
      await writeFileAtomic(join(this.keysDir, fileName), blob);
    } finally {
      this.writing.delete(params.batchId);
    }
    return this.index(params);
  }

  /**
   * Imports a restored batch under its own namespace and key_refs (docs/operations.md, "Disaster recovery").
   * Idempotent: keys already held (the same key under the same ref, batch and namespace) are kept, the others
   * are written. Refused, writing nothing, when a key_ref or the batch id already holds something else.
   */
  async restore(params: AddKeySetParams): Promise<RestoreOutcome> {
    if (this.writing.has(params.batchId)) return err("batch is being written");
    const refs = new Set(params.keys.map((key) => key.keyRef));
    const batch = this.byBatch.get(params.batchId);
    if (batch && (batch.namespace !== params.namespace || batch.keys.some((key) => !refs.has(key.keyRef)))) {
      return err("the batch id already holds other keys");
    }
    const missing: KeyMaterial[] = [];
    for (const key of params.keys) {
      const held = this.byRef.get(key.keyRef);
      if (!held) {
        missing.push(key);
        continue;
      }
      const same =
        held.namespace === params.namespace &&
        held.batchId === params.batchId &&
        Buffer.from(held.privateKey).equals(Buffer.from(key.privateKey));
      if (!same) return err("a key_ref of the batch already holds another key");
    }
    if (missing.length > 0) await this.add({ ...params, keys: missing });
    return ok({ entries: params.keys.map((key) => this.byRef.get(key.keyRef)!), imported: missing.length });
  }

  private index(params: AddKeySetParams): KeyEntry[] {
    const entries = params.keys.map((key) => ({
      ...key,
      namespace: params.namespace,
      batchId: params.batchId,
    }));
    for (const entry of entries) {
      this.byRef.set(entry.keyRef, entry);
      const address = entry.address.toLowerCase();
      const namespaces = this.namespacesByAddress.get(address) ?? new Set<string>();
      namespaces.add(entry.namespace);
      this.namespacesByAddress.set(address, namespaces);
    }
    const existing = this.byBatch.get(params.batchId);
    if (existing) existing.keys.push(...entries);
    else this.byBatch.set(params.batchId, { namespace: params.namespace, keys: entries });
    return entries;
  }
}

/**
 * Fresh key material: a random private key, its public key and address, and a key_ref of 32 random
 * bytes (64 lowercase hex).
 */
export function generateKeyMaterial(count: number): KeyMaterial[] {
  const privateKeys = randomPrivateKeys(count);
  // One draw for every key_ref of the batch: one system call, not one per key.
  const refs = randomBytes(32 * count).toString("hex");
  return privateKeys.map((privateKey, index) =>
    materialFromPrivateKey(privateKey, refs.slice(index * 64, index * 64 + 64)),
  );
}

/** Key material for a known private key (restores) under a given key_ref. */
export function materialFromPrivateKey(privateKey: Uint8Array, keyRef: string): KeyMaterial {
  const publicKey = publicKeyOf(privateKey);
  return {
    keyRef,
    privateKey,
    publicKey,
    publicKeyHex: toHex(publicKey),
    address: addressOfPublicKey(publicKey),
  };
}
