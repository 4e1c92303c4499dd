/**
 * The offline keys' files, made new and read: an authority key (ops/enclave-authority.ts) and the
 * recovery encryption key (ops/recovery-key.ts). Here rather than in those tools, so that the
 * local stack and the recovery tools that use them import a library, never another program's
 * entry (each program is bundled on its own: ops/lib/program-bundles.mjs).
 */
import { readPrivateKeyFile } from "../../origin/signer/private-key-file.ts";
import { authorityPublicKey, randomAuthoritySecret } from "../../shared/capability.ts";
import { fromHex, type Hex, toHex } from "../../shared/hex.ts";
import {
  randomX25519PrivateKey,
  recoveryKeyFingerprint,
  x25519PublicKey,
} from "../../shared/recovery-envelope.ts";
import { writeNewKeyFile } from "./key-file-tool.ts";
import type { NewFileDisk } from "./new-file.ts";

/** Writes a fresh authority seed to `path` (0600, refusing to overwrite); returns its public key. */
export async function createAuthorityKeyFile(
  path: string,
  disk?: NewFileDisk,
): Promise<{ publicKey: Hex; keyFile: string }> {
  const secret = randomAuthoritySecret();
  await writeNewKeyFile(path, secret, "an authority key", disk);
  return { publicKey: authorityPublicKey(secret), keyFile: path };
}

export type RecoveryKeyFile = { publicKey: Hex; fingerprint: Hex; keyFile: string };

/** Writes a fresh X25519 private key to `path` (0600, refusing to overwrite); returns its public key. */
export async function createRecoveryKeyFile(path: string, disk?: NewFileDisk): Promise<RecoveryKeyFile> {
  const privateKey = randomX25519PrivateKey();
  await writeNewKeyFile(path, privateKey, "a recovery key", disk);
  const publicKey = x25519PublicKey(privateKey);
  return { publicKey: toHex(publicKey), fingerprint: recoveryKeyFingerprint(publicKey), keyFile: path };
}

/** Reads a recovery encryption key file (32-byte hex); the error never carries the file's text. */
export async function readRecoveryKeyFile(path: string): Promise<Uint8Array> {
  const text = (await readPrivateKeyFile(path)).trim();
  let key: Uint8Array;
  try {
    key = fromHex(text);
  } catch {
    throw new Error(`${path} does not hold a recovery encryption key (32-byte hex)`);
  }
  if (key.length !== 32) throw new Error(`${path} does not hold a recovery encryption key (32-byte hex)`);
  return key;
}
