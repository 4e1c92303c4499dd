/**
 * Creates the recovery encryption key (docs/enclave.md, "Keys and where production keeps them"): an X25519
 * key pair whose public half goes to `npm run enclave -- init --recovery-enc-pubkey` and whose private
 * half (32 bytes, hex, in a new 0600 file) stays offline with the operator. Every backup envelope's keys are sealed to it with
 * HPKE; only the offline recovery steps (npm run restore-drill, npm run recover,
 * ops/recovery-reencrypt.ts) ever read it. Never overwrites an existing key. Run it offline.
 *
 *   npx tsx ops/recovery-key.ts --out recovery-encryption.key
 *   npx tsx ops/recovery-key.ts --show recovery-encryption.key
 *
 * `--show` prints the public key of an existing key file, alone on one line, for `init` again
 * (the recovery runbook): `--recovery-enc-pubkey "$(npx tsx ops/recovery-key.ts --show FILE)"`.
 *
 * This is not the recovery *authority* (ops/enclave-authority.ts, Ed25519): that one signs
 * restore_backup capabilities; this one decrypts backups. Both live offline with the operator.
 */
import { readFile } from "node:fs/promises";
import { fromHex, type Hex, toHex } from "../shared/hex.ts";
import {
  randomX25519PrivateKey,
  recoveryKeyFingerprint,
  x25519PublicKey,
} from "../shared/recovery-envelope.ts";
import { runCliIfMain } from "./lib/cli-shell.ts";
import { type KeyFileTool, keyFileCli, writeNewKeyFile } from "./lib/key-file-tool.ts";

export type RecoveryKeyFile = { publicKey: Hex; fingerprint: Hex; keyFile: string };

/** Writes a fresh X25519 private key to `path` (0600, refusing to overwrite); returns its public key. */
export async function createRecoveryKeyFile(path: string): Promise<RecoveryKeyFile> {
  const privateKey = randomX25519PrivateKey();
  await writeNewKeyFile(path, privateKey, "a recovery key");
  const publicKey = x25519PublicKey(privateKey);
  return { publicKey: toHex(publicKey), fingerprint: recoveryKeyFingerprint(publicKey), keyFile: path };
}

/** Reads a recovery encryption key file (32-byte hex); the error never carries the file's text. */
export async function readRecoveryKeyFile(path: string): Promise<Uint8Array> {
  const text = (await readFile(path, "utf8")).trim();
  let key: Uint8Array;
  try {
    key = fromHex(text);
  } catch {
    throw new Error(`${path} does not hold a recovery encryption key (32-byte hex)`);
  }
  if (key.length !== 32) throw new Error(`${path} does not hold a recovery encryption key (32-byte hex)`);
  return key;
}

const tool: KeyFileTool = {
  name: "recovery-key",
  path: "ops/recovery-key.ts",
  holds: "a 32-byte hex key",
  async create(path) {
    const created = await createRecoveryKeyFile(path);
    return { public_key: created.publicKey, fingerprint: created.fingerprint, key_file: created.keyFile };
  },
  show: async (path) => toHex(x25519PublicKey(await readRecoveryKeyFile(path))),
};

runCliIfMain(import.meta.url, keyFileCli(tool));
