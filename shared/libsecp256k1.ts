/**
 * libsecp256k1, the C library Bitcoin Core and geth use, through the binding the `secp256k1`
 * package ships prebuilt for Linux, macOS and Windows (its install script, which would compile
 * one, is denied in package.json: the prebuilt file is loaded at run time). On this machine it
 * recovers a public key in ~0.07 ms and signs in ~0.05 ms, where @noble/curves takes ~1.7 ms and
 * ~0.6 ms: recovery is the costliest step of every settlement the devnet mines and every x402
 * payment the origin verifies. It derives a public key in ~0.06 ms against noble's ~0.8 ms, which
 * every key the enclave generates, and every key a backup's verification restores, costs. Undefined where no prebuilt binding loads, and outside Node (the
 * agent client imports shared code in browsers): callers then use noble. No static `node:` import,
 * so the module stays runtime-neutral; Node's require is reached through process.getBuiltinModule.
 */

export type Libsecp256k1 = {
  /** RFC 6979 deterministic signature, low-S: the same bytes noble produces for the same input. */
  ecdsaSign(digest: Uint8Array, privateKey: Uint8Array): { signature: Uint8Array; recid: number };
  /** Throws when the signature does not parse (r or s zero or ≥ n) or recovers no point. */
  ecdsaRecover(signature: Uint8Array, recid: number, digest: Uint8Array, compressed: boolean): Uint8Array;
  /** Throws when the private key is zero or not below the curve's order. */
  publicKeyCreate(privateKey: Uint8Array, compressed: boolean): Uint8Array;
};

type NodeProcess = { getBuiltinModule?: (id: string) => unknown };
type NodeModule = { createRequire(url: string): (id: string) => unknown };

function load(): Libsecp256k1 | undefined {
  const nodeProcess = (globalThis as { process?: NodeProcess }).process;
  const nodeModule = nodeProcess?.getBuiltinModule?.("node:module") as NodeModule | undefined;
  if (!nodeModule) return undefined;
  try {
    // `secp256k1/bindings` is the native build only; the package's main would fall back to a
    // slower pure-JS curve on its own, which should be noble's instead.
    return nodeModule.createRequire(import.meta.url)("secp256k1/bindings") as Libsecp256k1;
  } catch {
    return undefined;
  }
}

export const libsecp256k1: Libsecp256k1 | undefined = load();

/** Which implementation this process signs and recovers with, for benchmarks and start-up lines. */
export const secp256k1Backend: "libsecp256k1" | "noble" = libsecp256k1 ? "libsecp256k1" : "noble";
