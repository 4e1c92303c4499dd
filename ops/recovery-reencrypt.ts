/**
 * The offline re-encryption step of a recovery (docs/operations.md, "Disaster recovery"), for an operator who
 * keeps the recovery encryption key on a machine that never reaches the enclave:
 *
 *   npm run recovery-reencrypt -- --envelope BATCH.backup --recovery-enc-key FILE \
 *     --transport-key HEX --env-id ID --out BATCH.package
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
  "usage: npm run recovery-reencrypt -- --envelope FILE --recovery-enc-key FILE --transport-key HEX --env-id ID --out FILE\n";

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
  const result = await reencryptForTransport({
    envelope: await readArgumentBytes("--envelope", values.envelope),
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
