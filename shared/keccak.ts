/**
 * Keccak-256, Ethereum's hash, through the C implementation the `keccak` package ships prebuilt
 * for Linux, macOS and Windows on x64 (its install script, which would compile one, is denied in
 * package.json: the prebuilt file is loaded at run time). The package's own API wraps each hash in
 * a stream; this module drives the binding's sponge directly, one state reused, since a hash here
 * is synchronous and a process's threads each load their own. On this machine a 32-byte input
 * hashes in ~2 µs against ~13 µs for @noble/hashes, 532 bytes in ~4 µs against ~55 µs: the
 * devnet hashes every trie node, transaction and header it touches. Where no prebuilt binding
 * loads, and outside Node (the agent client imports shared code in browsers), noble's serves.
 * No static `node:` import, so the module stays runtime-neutral (see libsecp256k1.ts).
 */
import { keccak_256 as nobleKeccak256 } from "@noble/hashes/sha3";

/** The binding's sponge (the `keccak` package's KeccakState). */
type KeccakState = {
  initialize(rate: number, capacity: number): void;
  absorb(data: Buffer): void;
  squeeze(length: number): Buffer;
};

type NodeProcess = { getBuiltinModule?: (id: string) => unknown };
type NodeModule = { createRequire(path: string): NodeRequire };
type NodeRequire = ((id: string) => unknown) & { resolve(id: string): string };

// Keccak-256: a 1088-bit rate and 512-bit capacity, Keccak's own padding (no SHA-3 suffix).
const RATE_BITS = 1088;
const CAPACITY_BITS = 512;

function load(): ((data: Uint8Array) => Uint8Array) | undefined {
  const nodeProcess = (globalThis as { process?: NodeProcess }).process;
  const nodeModule = nodeProcess?.getBuiltinModule?.("node:module") as NodeModule | undefined;
  if (!nodeModule) return undefined;
  try {
    const packageJson = nodeModule.createRequire(import.meta.url).resolve("keccak/package.json");
    const packageRequire = nodeModule.createRequire(packageJson);
    const build = packageRequire("node-gyp-build") as (dir: string) => new () => KeccakState;
    const State = build(packageJson.slice(0, -"/package.json".length));
    const state = new State();
    return (data) => {
      state.initialize(RATE_BITS, CAPACITY_BITS);
      state.absorb(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
      // A plain Uint8Array of its own, as noble returns: a Buffer's slice would share memory.
      return Uint8Array.from(state.squeeze(32));
    };
  } catch {
    return undefined;
  }
}

const native = load();

/** Keccak-256 of `data`: 32 bytes. */
export const keccak256: (data: Uint8Array) => Uint8Array = native ?? ((data) => nobleKeccak256(data));

/** Which implementation this process hashes with, for benchmarks and tests. */
export const keccakBackend: "native" | "noble" = native ? "native" : "noble";
