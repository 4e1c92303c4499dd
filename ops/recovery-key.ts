/**
 * Creates the recovery encryption key (docs/enclave.md, "Keys and where production keeps them"): an X25519
 * key pair whose public half goes to `npm run enclave -- init --recovery-enc-pubkey` and whose private
 * half (32 bytes, hex, in a new 0600 file) stays offline with the operator. Every backup envelope's keys are sealed to it with
 * HPKE; only the offline recovery steps (npm run restore-drill, npm run recover,
 * npm run recovery-reencrypt) ever read it. Never overwrites an existing key. Run it offline.
 *
 *   npm run recovery-key -- --out recovery-encryption.key
 *   npm run recovery-key -- --show recovery-encryption.key
 *
 * `--show` prints the public key of an existing key file, alone on one line, for `init` again
 * (the recovery runbook): `--recovery-enc-pubkey "$(npm run --silent recovery-key -- --show FILE)"`.
 *
 * This is not the recovery *authority* (ops/enclave-authority.ts, Ed25519): that one signs
 * restore_backup capabilities; this one decrypts backups. Both live offline with the operator.
 */
import { toHex } from "../shared/hex.ts";
import { x25519PublicKey } from "../shared/recovery-envelope.ts";
import { runCli } from "./lib/cli-shell.ts";
import { type KeyFileTool, keyFileCli } from "./lib/key-file-tool.ts";
import { createRecoveryKeyFile, readRecoveryKeyFile } from "./lib/key-files.ts";

const tool: KeyFileTool = {
  name: "recovery-key",
  holds: "a 32-byte hex key",
  async create(path) {
    const created = await createRecoveryKeyFile(path);
    return { public_key: created.publicKey, fingerprint: created.fingerprint, key_file: created.keyFile };
  },
  show: async (path) => toHex(x25519PublicKey(await readRecoveryKeyFile(path))),
};

runCli(keyFileCli(tool));
