import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { readAuthoritySecret } from "../../origin/signer/capability-minter.ts";
import { authorityPublicKey } from "../../shared/capability.ts";
import { createAuthorityKeyFile } from "../enclave-authority.ts";

const run = promisify(execFile);

export type LocalAuthority = { adminKeyFile: string; recoveryKeyFile: string };

/**
 * First run of the local stack: the admin and recovery authority key files, then
 * `enclave init` sealing their public keys, the env id and chain 77. Later runs reuse both.
 */
export async function initEnclaveOnce(params: {
  dataDir: string;
  enclaveDir: string;
  envId: string;
  onLine: (line: string) => void;
}): Promise<LocalAuthority> {
  const adminKeyFile = path.join(params.dataDir, "admin-authority.key");
  const recoveryKeyFile = path.join(params.dataDir, "recovery-authority.key");
  if (existsSync(path.join(params.enclaveDir, "sealing.key"))) return { adminKeyFile, recoveryKeyFile };

  const admin = existsSync(adminKeyFile)
    ? authorityPublicKey(await readAuthoritySecret(adminKeyFile))
    : (await createAuthorityKeyFile(adminKeyFile)).publicKey;
  const recovery = existsSync(recoveryKeyFile)
    ? authorityPublicKey(await readAuthoritySecret(recoveryKeyFile))
    : (await createAuthorityKeyFile(recoveryKeyFile)).publicKey;
  await run(process.execPath, [
    "--import",
    "tsx",
    "enclave/main.ts",
    "init",
    "--env-id",
    params.envId,
    "--data-dir",
    params.enclaveDir,
    "--admin-pubkey",
    admin,
    "--recovery-pubkey",
    recovery,
  ]);
  params.onLine(`enclave    initialised for env ${params.envId} (authority keys in ${params.dataDir})`);
  return { adminKeyFile, recoveryKeyFile };
}
