/**
 * Creates an Ed25519 authority key pair for enclave capabilities (docs/enclave.md, "Keys and where production
 * keeps them"): writes the 32-byte seed as hex to a new 0600 file and prints the public key to pass to
 * `npm run enclave -- init --admin-pubkey/--policy-pubkey/--recovery-pubkey`. Never overwrites an
 * existing key. Run it offline for the policy and recovery keys: only their public keys travel.
 *
 *   npm run enclave-authority -- --out .data/admin-authority.key
 *   npm run enclave-authority -- --show .data/admin-authority.key
 *
 * `--show` prints the public key of an existing key file, alone on one line, for `init` again
 * (the recovery runbook) as `--admin-pubkey "$(npm run --silent enclave-authority -- --show FILE)"`.
 */
import { readAuthoritySecret } from "../origin/signer/capability-minter.ts";
import { authorityPublicKey } from "../shared/capability.ts";
import { runCli } from "./lib/cli-shell.ts";
import { type KeyFileTool, keyFileCli } from "./lib/key-file-tool.ts";
import { createAuthorityKeyFile } from "./lib/key-files.ts";

const tool: KeyFileTool = {
  name: "enclave-authority",
  holds: "a 32-byte hex seed",
  async create(path) {
    const created = await createAuthorityKeyFile(path);
    return { public_key: created.publicKey, key_file: created.keyFile };
  },
  show: async (path) => authorityPublicKey(await readAuthoritySecret(path)),
};

runCli(keyFileCli(tool));
