/**
 * secp256k1 public-key recovery, the costliest step of a settlement (once for the transaction's
 * sender, once for the authorization the precompile checks), moved off the main thread the way
 * geth's sender cacher does it: when a transaction arrives, its signatures go to worker threads;
 * the keys they recover wait here until ethereumjs (through Common's customCrypto.ecrecover) or
 * the precompile asks for them, by the exact same inputs. Anything not prefetched, or asked for
 * before its worker answered, is recovered on the spot with the same function, so results never
 * depend on the workers; only the time does.
 *
 * Where libsecp256k1 loads (shared/libsecp256k1.ts) a recovery costs ~0.07 ms on the spot, less
 * than handing it to a worker and back, so the devnet then starts no workers (../index.ts).
 */
import { Worker } from "node:worker_threads";
import { bytesToHex, ecrecover as nobleEcrecover, setLengthLeft } from "@ethereumjs/util";
import { libsecp256k1 } from "../../shared/libsecp256k1.ts";

/** The arguments of @ethereumjs/util's ecrecover. */
export type RecoveryInput = {
  hash: Uint8Array;
  v: bigint;
  r: Uint8Array;
  s: Uint8Array;
  chainId: bigint | undefined;
};

export type Ecrecover = (
  hash: Uint8Array,
  v: bigint,
  r: Uint8Array,
  s: Uint8Array,
  chainId?: bigint,
) => Uint8Array;

/**
 * @ethereumjs/util's ecrecover on libsecp256k1 when it loads: the same 64-byte key (x ‖ y) for
 * the same input, and a throw wherever that one throws (a v that is no recovery bit, r or s zero
 * or not below the order, no point for r).
 */
const native = libsecp256k1;
export const ecrecover: Ecrecover = native
  ? (hash, v, r, s, chainId) => {
      const recovery = v === 0n || v === 1n ? v : chainId === undefined ? v - 27n : v - (chainId * 2n + 35n);
      if (recovery !== 0n && recovery !== 1n) throw new Error("Invalid signature v value");
      const signature = new Uint8Array(64);
      signature.set(setLengthLeft(r, 32), 0);
      signature.set(setLengthLeft(s, 32), 32);
      return native.ecdsaRecover(signature, Number(recovery), hash, false).subarray(1);
    }
  : nobleEcrecover;

/** Keys recovered ahead and not yet asked for; the oldest go first beyond this. */
const MAX_PREFETCHED = 16_384;

type WorkerSlot = { worker: Worker; busy: number };
type Waiter = {
  slot: WorkerSlot;
  resolve(keys: Array<Uint8Array | null>): void;
  reject(error: unknown): void;
};

export class SignatureRecovery {
  readonly #slots: WorkerSlot[] = [];
  readonly #waiters = new Map<number, Waiter>();
  readonly #prefetched = new Map<string, Uint8Array>();
  #nextId = 0;
  #served = 0;

  /** `workers` threads; 0 recovers everything on the calling thread, as ethereumjs does by default. */
  constructor(workers: number) {
    for (let i = 0; i < workers; i++) this.#startWorker();
  }

  /**
   * Recovers `inputs` on a worker and keeps the keys for `ecrecover`. Resolves when they are
   * kept; never rejects (a worker lost on the way just leaves them to be recovered on the spot).
   */
  async prefetch(inputs: readonly RecoveryInput[]): Promise<void> {
    const slot = this.#idlest();
    if (slot === undefined || inputs.length === 0) return;
    let keys: Array<Uint8Array | null>;
    try {
      keys = await this.#send(slot, inputs);
    } catch {
      return;
    }
    keys.forEach((key, i) => {
      // null: the signature recovers nothing; recovering it again on the spot throws the same error.
      if (key !== null) this.#keep(keyOf(inputs[i]!), key);
    });
  }

  /** Keys recovered ahead and not asked for yet. */
  get prefetched(): number {
    return this.#prefetched.size;
  }

  /** Keys handed out from the prefetched ones since start (the rest were recovered on the spot). */
  get served(): number {
    return this.#served;
  }

  /** Drop-in for @ethereumjs/util's ecrecover: a prefetched key when there is one, taken once. */
  readonly ecrecover: Ecrecover = (hash, v, r, s, chainId) => {
    const key = keyOf({ hash, v, r, s, chainId });
    const found = this.#prefetched.get(key);
    if (found === undefined) return ecrecover(hash, v, r, s, chainId);
    this.#prefetched.delete(key);
    this.#served++;
    return found;
  };

  async close(): Promise<void> {
    const slots = this.#slots.splice(0);
    await Promise.all(slots.map(({ worker }) => worker.terminate()));
  }

  #startWorker(): void {
    const worker = new Worker(new URL("./recovery-worker.mjs", import.meta.url));
    const slot: WorkerSlot = { worker, busy: 0 };
    // Idle workers must not keep a process alive that is otherwise done.
    worker.unref();
    worker.on("message", ({ id, keys }: { id: number; keys: Array<Uint8Array | null> }) => {
      const waiter = this.#waiters.get(id);
      if (waiter === undefined) return;
      this.#waiters.delete(id);
      slot.busy--;
      waiter.resolve(keys);
    });
    const lose = (error: unknown): void => {
      const index = this.#slots.indexOf(slot);
      if (index >= 0) this.#slots.splice(index, 1);
      for (const [id, waiter] of this.#waiters) {
        if (waiter.slot !== slot) continue;
        this.#waiters.delete(id);
        waiter.reject(error);
      }
    };
    worker.on("error", lose);
    worker.on("exit", (code) => lose(new Error(`recovery worker exited with code ${code}`)));
    this.#slots.push(slot);
  }

  #send(slot: WorkerSlot, inputs: readonly RecoveryInput[]): Promise<Array<Uint8Array | null>> {
    return new Promise((resolve, reject) => {
      const id = this.#nextId++;
      this.#waiters.set(id, { slot, resolve, reject });
      slot.busy++;
      slot.worker.postMessage({ id, inputs });
    });
  }

  #idlest(): WorkerSlot | undefined {
    let best: WorkerSlot | undefined;
    for (const slot of this.#slots) if (best === undefined || slot.busy < best.busy) best = slot;
    return best;
  }

  #keep(key: string, publicKey: Uint8Array): void {
    if (this.#prefetched.size >= MAX_PREFETCHED) {
      const oldest = this.#prefetched.keys().next();
      if (!oldest.done) this.#prefetched.delete(oldest.value);
    }
    this.#prefetched.set(key, publicKey);
  }
}

function keyOf({ hash, v, r, s, chainId }: RecoveryInput): string {
  return `${bytesToHex(hash)}:${v}:${bytesToHex(r)}:${bytesToHex(s)}:${chainId ?? ""}`;
}
