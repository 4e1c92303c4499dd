import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { createAuthorityKeyFile, createRecoveryKeyFile, readRecoveryKeyFile } from "../ops/lib/key-files.ts";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { readAuthoritySecret } from "../origin/signer/capability-minter.ts";
import { authorityPublicKey } from "../shared/capability.ts";
import { toHex } from "../shared/hex.ts";
import { x25519PublicKey } from "../shared/recovery-envelope.ts";

/**
 * Runs `enclave init` with `args` and resolves with what it printed. In a process group of its own,
 * as the stack's parts are: a terminal's Ctrl-C signals the launcher's whole group, and would cut
 * the init between its files; the launcher's stop waits for it instead (dev/local-stack.ts).
 */
function runInit(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { detached: true, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once("error", reject);
    child.once("close", (code, signal) => {
      if (code === 0) resolve(stdout);
      else reject(new Error(`enclave init exited ${code ?? signal}: ${stderr.trim()}`));
    });
  });
}

/**
 * The local stack plays every role, so all three authority keys and the recovery encryption key
 * sit under the data folder. Only the admin key is given to the origin; in production the policy
 * and recovery keys stay offline with the operator (docs/enclave.md "Keys and where production keeps them").
 */
export type LocalAuthority = {
  adminKeyFile: string;
  policyKeyFile: string;
  recoveryKeyFile: string;
  /** X25519 private key every backup is sealed to. */
  recoveryEncKeyFile: string;
};

/**
 * An enclave data folder `enclave init` has completed, as the enclave itself judges it: its sealing
 * key and its sealed config (written right after the key). A folder with the key alone is an init
 * cut in between, under which nothing was sealed: init runs again.
 */
export function enclaveInitialised(enclaveDir: string): boolean {
  return (
    existsSync(path.join(enclaveDir, "sealing.key")) && existsSync(path.join(enclaveDir, "enclave.sealed"))
  );
}

/** Where the local stack keeps the record `enclave init` printed (public keys only). */
export function initRecordPath(dataDir: string): string {
  return path.join(dataDir, "enclave-init.json");
}

/**
 * First run of the local stack: the admin, policy and recovery authority key files and the
 * recovery encryption key file, then `enclave init` sealing their public keys, the env id and
 * chain 77. Later runs reuse them.
 */
export async function initEnclaveOnce(params: {
  dataDir: string;
  enclaveDir: string;
  envId: string;
  onLine: (line: string) => void;
}): Promise<LocalAuthority> {
  const authority: LocalAuthority = {
    adminKeyFile: path.join(params.dataDir, "admin-authority.key"),
    policyKeyFile: path.join(params.dataDir, "policy-authority.key"),
    recoveryKeyFile: path.join(params.dataDir, "recovery-authority.key"),
    recoveryEncKeyFile: path.join(params.dataDir, "recovery-encryption.key"),
  };
  if (enclaveInitialised(params.enclaveDir)) return authority;

  const publicKeyOf = async (file: string): Promise<string> =>
    existsSync(file)
      ? authorityPublicKey(await readAuthoritySecret(file))
      : (await createAuthorityKeyFile(file)).publicKey;
  const stdout = await runInit([
    ...programArgs("enclave/main.ts"),
    "init",
    "--env-id",
    params.envId,
    "--data-dir",
    params.enclaveDir,
    "--admin-pubkey",
    await publicKeyOf(authority.adminKeyFile),
    "--policy-pubkey",
    await publicKeyOf(authority.policyKeyFile),
    "--recovery-pubkey",
    await publicKeyOf(authority.recoveryKeyFile),
    "--recovery-enc-pubkey",
    existsSync(authority.recoveryEncKeyFile)
      ? toHex(x25519PublicKey(await readRecoveryKeyFile(authority.recoveryEncKeyFile)))
      : (await createRecoveryKeyFile(authority.recoveryEncKeyFile)).publicKey,
  ]);
  // init's record (env id, instance id, the four public keys; nothing secret) is what a recovery
  // initialises the next enclave from, so it is kept beside the keys rather than scrolled away.
  await writeFile(initRecordPath(params.dataDir), stdout);
  params.onLine(
    `enclave    initialised for env ${params.envId} (authority keys in ${params.dataDir}, record ${initRecordPath(params.dataDir)})`,
  );
  return authority;
}
