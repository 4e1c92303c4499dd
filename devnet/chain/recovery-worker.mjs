/**
 * Worker thread of signature-recovery.ts: recovers secp256k1 public keys with the same
 * function ethereumjs uses for transaction senders, off the devnet's main thread.
 *
 * Plain JavaScript on purpose: a worker thread does not inherit the TypeScript loading of its
 * parent (tsx, or vitest's transform), but any Node can run this file as it stands.
 *
 * In: { id, inputs: [{ hash, v, r, s, chainId }] }. Out: { id, keys: [Uint8Array | null] }, null
 * where ecrecover throws (the caller then recovers on its own thread and sees the same error).
 */
import { parentPort } from "node:worker_threads";
import { ecrecover } from "@ethereumjs/util";

if (parentPort === null) throw new Error("recovery-worker.mjs runs as a worker thread");
const port = parentPort;

port.on("message", ({ id, inputs }) => {
  const keys = inputs.map(({ hash, v, r, s, chainId }) => {
    try {
      return ecrecover(hash, v, r, s, chainId);
    } catch {
      return null;
    }
  });
  port.postMessage({ id, keys });
});
