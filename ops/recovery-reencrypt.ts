/**
 * The offline re-encryption step of a recovery (docs/operations.md, "Disaster recovery"), for an operator who
 * keeps the recovery encryption key on a machine that never reaches the enclave:
 *
 *   npm run recovery-reencrypt -- --envelope BATCH.backup --recovery-enc-key FILE \
 *     --transport-key HEX --env-id ID --out BATCH.package \
 *     (--backup-signer HEX | --accept-unsigned-backups)
 *
 * As `recover --backup-dir`, it takes only an envelope signed by the lost enclave's backup signer
 * (anyone holding the public recovery key can make one of keys they know), or an unsigned (v2)
 * one made before backups were signed when told to, with a warning.
 *
 * It opens the envelope's recovery copy and seals the same keys to the transport key the new
 * enclave offered (`npm run recover -- transport-key`), writing a restore package (0600) that only
 * that enclave process can open; `npm run recover -- --package FILE …` then restores it. The
 * plaintext keys exist only in this process's memory. Exit 0 written, 1 refused, 2 usage
 * (docs/operations.md#exit-codes-of-the-operator-tools).
 */
import { writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { CHAIN_ID } from "../shared/constants.ts";
import { fromHex } from "../shared/hex.ts";
import { ENV_ID_PATTERN } from "../shared/identity-proof.ts";
import { checkBackupSignature, parseBackupEnvelope } from "../shared/recovery-envelope.ts";
import {
  type CliOutcome,
  DONE,
  readArgumentBytes,
  readArgumentFile,
  refused,
  runCli,
  UsageError,
} from "./lib/cli-shell.ts";
import { readRecoveryKeyFile } from "./lib/key-files.ts";
import { reencryptForTransport } from "./lib/reencrypt-envelope.ts";

const USAGE =
  "usage: npm run recovery-reencrypt -- --envelope FILE --recovery-enc-key FILE --transport-key HEX --env-id ID --out FILE (--backup-signer HEX | --accept-unsigned-backups)\n";

async function run(argv: string[]): Promise<CliOutcome> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      envelope: { type: "string" },
      "recovery-enc-key": { type: "string" },
      "transport-key": { type: "string" },
      "env-id": { type: "string" },
      out: { type: "string" },
      "backup-signer": { type: "string" },
      "accept-unsigned-backups": { type: "boolean" },
    },
  });
  const transportHex = values["transport-key"] ?? "";
  if (
    !values.envelope ||
    !values["recovery-enc-key"] ||
    !/^(0x)?[0-9a-fA-F]{64}$/.test(transportHex) ||
    !values["env-id"] ||
    !ENV_ID_PATTERN.test(values["env-id"]) ||
    !values.out
  ) {
    throw new UsageError("every flag is required: a 32-byte hex --transport-key, a valid --env-id");
  }
  const signerHex = values["backup-signer"];
  if (
    signerHex === undefined ? !values["accept-unsigned-backups"] : !/^(0x)?[0-9a-fA-F]{64}$/.test(signerHex)
  ) {
    throw new UsageError(
      "give --backup-signer HEX (32 bytes: the lost enclave's, from its init record), or --accept-unsigned-backups",
    );
  }
  const envelope = await readArgumentBytes("--envelope", values.envelope);
  const parsed = parseBackupEnvelope(envelope);
  if (parsed.ok) {
    const signed = checkBackupSignature(parsed.value, {
      expected: signerHex === undefined ? null : fromHex(signerHex),
      acceptUnsigned: values["accept-unsigned-backups"] === true,
    });
    if (!signed.ok) {
      process.stdout.write(`recovery-reencrypt: refused: ${values.envelope}: ${signed.error}\n`);
      return refused();
    }
    if (signed.value) {
      process.stdout.write(
        `recovery-reencrypt: warning: ${values.envelope} is an unsigned envelope (v2), taken without a signer check (--accept-unsigned-backups)\n`,
      );
    }
  }
  const result = await reencryptForTransport({
    envelope,
    recoveryPrivateKey: await readArgumentFile(
      "--recovery-enc-key",
      values["recovery-enc-key"],
      "a 32-byte hex key",
      readRecoveryKeyFile,
    ),
    transportPublicKey: fromHex(transportHex),
    expect: { envId: values["env-id"], chainId: CHAIN_ID },
  });
  if (!result.ok) {
    process.stdout.write(`recovery-reencrypt: refused: ${result.error.reason}\n`);
    return refused();
  }
  const { package: restorePackage, header } = result.value;
  try {
    await writeFile(values.out, restorePackage, { mode: 0o600, flag: "wx" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    return refused(`${values.out} exists; refusing to overwrite it`);
  }
  process.stdout.write(
    `recovery-reencrypt: batch ${header.batch_id} (${header.keys.length} keys, ${header.namespace}) sealed to the transport key: ${values.out}\n`,
  );
  return DONE;
}

runCli({ name: "recovery-reencrypt", usage: USAGE, run });
