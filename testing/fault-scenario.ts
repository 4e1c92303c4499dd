/**
 * Fault scenarios for the fault tests: a fault is put on, the test's steps run under it, and the
 * fault is lifted whatever the steps did (an assertion that fails inside must not leave the
 * enclave down or the chain cut for the rest of the file).
 */
import type { EnclaveFixture } from "./enclave-process.ts";
import { type RpcCutProxy, startRpcCutProxy } from "./rpc-cut-proxy.ts";
import { useFixture } from "./stack.ts";

export type Fault = {
  on(): Promise<unknown>;
  off(): Promise<unknown>;
};

/** Runs `steps` with `fault` on, and lifts it after them, even when they throw. */
export async function underFault<T>(fault: Fault, steps: () => Promise<T>): Promise<T> {
  await fault.on();
  try {
    return await steps();
  } finally {
    await fault.off();
  }
}

/** The enclave stopped (SIGTERM), then started again on its data folder: keys and counters survive. */
export const enclaveDown = (enclave: EnclaveFixture): Fault => ({
  on: () => enclave.stop(),
  off: () => enclave.start(),
});

/** Another version of the enclave on the socket (another protocol profile), then the usual one again. */
export const enclaveProfile = (enclave: EnclaveFixture, profile: string): Fault => ({
  on: () => enclave.start({ profile }),
  off: () => enclave.start(),
});

/**
 * A chain pass-through (testing/rpc-cut-proxy.ts) in front of the devnet at `target()`, for the
 * describe block it is called in; the origins a test points at it are the ones a cut reaches.
 */
export function useRpcCutProxy(target: () => string): RpcCutProxy {
  return useFixture(
    "chain pass-through",
    () => startRpcCutProxy(target()),
    (proxy) => proxy.close(),
  );
}
