/**
 * The offline re-encryption step of a recovery (docs/operations.md, "Disaster recovery"), for an operator who
 * keeps the recovery encryption key on a machine that never reaches the enclave:
 *
 *   npx tsx ops/recovery-reencrypt.ts --envelope BATCH.backup --recovery-enc-key FILE \
 *     --transport-key HEX --env-id ID --out BATCH.package
 *
 * It opens the envelope's recovery copy and seals the same keys to the transport key the new
 * enclave offered (`npm run recover -- transport-key`), writing a restore package (0600) that only
 * that enclave process can open; `npm run recover -- --package FILE …` then restores it. The
 * plaintext keys exist only in this process's memory. Exit 0 written, 1 refused, 2 usage.
 */
import { readFile, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import { CHAIN_ID } from "../shared/constants.ts";
import { errorMessage } from "../shared/error-message.ts";
import { fromHex } from "../shared/hex.ts";
import { ENV_ID_PATTERN } from "../shared/identity-proof.ts";
import { reencryptForTransport } from "./lib/reencrypt-envelope.ts";
import { readRecoveryKeyFile } from "./recovery-key.ts";

const USAGE =
  "usage: npx tsx ops/recovery-reencrypt.ts --envelope FILE --recovery-enc-key FILE --transport-key HEX --env-id ID --out FILE\n";

async function main(): Promise<number> {
  const { values } = parseArgs({
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
    process.stderr.write(USAGE);
    return 2;
  }
  const result = await reencryptForTransport({
    envelope: new Uint8Array(await readFile(values.envelope)),
    recoveryPrivateKey: await readRecoveryKeyFile(values["recovery-enc-key"]),
    transportPublicKey: fromHex(transportHex),
    expect: { envId: values["env-id"], chainId: CHAIN_ID },
  });
  if (!result.ok) {
    process.stdout.write(`recovery-reencrypt: refused: ${result.error.reason}\n`);
    return 1;
  }
  const { package: restorePackage, header } = result.value;
  await writeFile(values.out, restorePackage, { mode: 0o600, flag: "wx" });
  process.stdout.write(
    `recovery-reencrypt: batch ${header.batch_id} (${header.keys.length} keys, ${header.namespace}) sealed to the transport key: ${values.out}\n`,
  );
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`recovery-reencrypt: ${errorMessage(error)}\n`);
    process.exit(1);
  },
);
