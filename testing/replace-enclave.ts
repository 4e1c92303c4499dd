/**
 * The disaster the recovery runbook starts from (docs/operations.md, "Disaster recovery"): the
 * enclave's process and its whole data folder lost (sealing key, keystore, state), and a new enclave
 * initialised in its place by `npm run enclave -- init`, as the operator runs it, with the same env
 * id and the same authority and recovery public keys: a new sealing key, no old file. It is then
 * started, serving the same socket.
 */
import { execFile } from "node:child_process";
import { rm } from "node:fs/promises";
import { promisify } from "node:util";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { authorityPublicKey } from "../shared/capability.ts";
import { toHex } from "../shared/hex.ts";
import { x25519PublicKey } from "../shared/recovery-envelope.ts";
import { type EnclaveFixture, REPO_ROOT } from "./enclave-process.ts";

const run = promisify(execFile);

export async function loseAndReplaceEnclave(enclave: EnclaveFixture): Promise<void> {
  await enclave.stop();
  await rm(enclave.dataDir, { recursive: true, force: true });
  await run(
    process.execPath,
    [
      ...programArgs("enclave/main.ts"),
      "init",
      "--data-dir",
      enclave.dataDir,
      "--env-id",
      enclave.envId,
      "--admin-pubkey",
      authorityPublicKey(enclave.adminSecret),
      "--policy-pubkey",
      authorityPublicKey(enclave.policySecret),
      "--recovery-pubkey",
      authorityPublicKey(enclave.recoverySecret),
      "--recovery-enc-pubkey",
      toHex(x25519PublicKey(enclave.recoveryEncKey)),
    ],
    { cwd: REPO_ROOT },
  );
  await enclave.start();
}
