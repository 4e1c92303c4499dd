/**
 * Creates an Ed25519 authority key pair for enclave capabilities (docs/enclave.md, "Keys and where production
 * keeps them"): writes the 32-byte seed as hex to a new 0600 file and prints the public key to pass to
 * `npm run enclave -- init --admin-pubkey/--policy-pubkey/--recovery-pubkey`. Never overwrites an
 * existing key. Run it offline for the policy and recovery keys: only their public keys travel.
 *
 *   npx tsx ops/enclave-authority.ts --out .data/admin-authority.key
 *   npx tsx ops/enclave-authority.ts --show .data/admin-authority.key
 *
 * `--show` prints the public key of an existing key file, alone on one line, for `init` again
 * (the recovery runbook) as `--admin-pubkey "$(npx tsx ops/enclave-authority.ts --show FILE)"`.
 *
 * `createAuthorityKeyFile` is exported for the dev-stack launcher's first run.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { readAuthoritySecret } from "../origin/signer/capability-minter.ts";
import { authorityPublicKey, randomAuthoritySecret } from "../shared/capability.ts";
import { errorMessage } from "../shared/error-message.ts";
import { type Hex, toHex } from "../shared/hex.ts";

/** Thrown when the key file already exists. */
export class AuthorityKeyExistsError extends Error {
  override readonly name = "AuthorityKeyExistsError";
}

/** Writes a fresh authority seed to `path` (0600, refusing to overwrite); returns its public key. */
export async function createAuthorityKeyFile(path: string): Promise<{ publicKey: Hex; keyFile: string }> {
  const secret = randomAuthoritySecret();
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  try {
    // "wx": refuse to replace a key an enclave may already be sealed with.
    await writeFile(path, `${toHex(secret)}\n`, { mode: 0o600, flag: "wx" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") {
      throw new AuthorityKeyExistsError(`${path} exists; refusing to overwrite an authority key`);
    }
    throw error;
  }
  return { publicKey: authorityPublicKey(secret), keyFile: path };
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { out: { type: "string" }, show: { type: "string" } },
    strict: true,
  });
  if (values.show !== undefined && values.out === undefined) {
    try {
      process.stdout.write(`${authorityPublicKey(await readAuthoritySecret(values.show))}\n`);
      return 0;
    } catch (error) {
      // The path is the operator's own; the file's contents never appear in a message.
      const reason =
        error instanceof Error && "code" in error ? String(error.code) : "not a 32-byte hex seed";
      process.stderr.write(`enclave-authority: cannot read ${values.show} (${reason})\n`);
      return 2;
    }
  }
  if (!values.out || values.show !== undefined) {
    process.stderr.write("usage: npx tsx ops/enclave-authority.ts --out PATH | --show PATH\n");
    return 64;
  }
  try {
    const created = await createAuthorityKeyFile(values.out);
    process.stdout.write(`${JSON.stringify({ public_key: created.publicKey, key_file: created.keyFile })}\n`);
    return 0;
  } catch (error) {
    if (!(error instanceof AuthorityKeyExistsError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return 2;
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`enclave-authority: ${errorMessage(error)}\n`);
      process.exit(1);
    },
  );
}
