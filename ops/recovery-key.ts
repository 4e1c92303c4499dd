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
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { errorMessage } from "../shared/error-message.ts";
import { fromHex, type Hex, toHex } from "../shared/hex.ts";
import {
  randomX25519PrivateKey,
  recoveryKeyFingerprint,
  x25519PublicKey,
} from "../shared/recovery-envelope.ts";

/** Thrown when the key file already exists. */
export class RecoveryKeyExistsError extends Error {
  override readonly name = "RecoveryKeyExistsError";
}

export type RecoveryKeyFile = { publicKey: Hex; fingerprint: Hex; keyFile: string };

/** Writes a fresh X25519 private key to `path` (0600, refusing to overwrite); returns its public key. */
export async function createRecoveryKeyFile(path: string): Promise<RecoveryKeyFile> {
  const privateKey = randomX25519PrivateKey();
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  try {
    await writeFile(path, `${toHex(privateKey)}\n`, { mode: 0o600, flag: "wx" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") {
      throw new RecoveryKeyExistsError(`${path} exists; refusing to overwrite a recovery key`);
    }
    throw error;
  }
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

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { out: { type: "string" }, show: { type: "string" } },
    strict: true,
  });
  if (values.show !== undefined && values.out === undefined) {
    try {
      process.stdout.write(`${toHex(x25519PublicKey(await readRecoveryKeyFile(values.show)))}\n`);
      return 0;
    } catch (error) {
      const reason = error instanceof Error && "code" in error ? String(error.code) : "not a 32-byte hex key";
      process.stderr.write(`recovery-key: cannot read ${values.show} (${reason})\n`);
      return 2;
    }
  }
  if (!values.out || values.show !== undefined) {
    process.stderr.write("usage: npx tsx ops/recovery-key.ts --out PATH | --show PATH\n");
    return 64;
  }
  try {
    const created = await createRecoveryKeyFile(values.out);
    process.stdout.write(
      `${JSON.stringify({ public_key: created.publicKey, fingerprint: created.fingerprint, key_file: created.keyFile })}\n`,
    );
    return 0;
  } catch (error) {
    if (!(error instanceof RecoveryKeyExistsError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return 2;
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`recovery-key: ${errorMessage(error)}\n`);
      process.exit(1);
    },
  );
}
