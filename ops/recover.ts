/**
 * `npm run recover`: brings a new enclave back to holding every backed-up key.
 *
 *   npm run recover -- transport-key [--socket PATH]
 *       prints a fresh transport key of the enclave (for an air-gapped re-encryption with
 *       ops/recovery-reencrypt.ts); it lives in the enclave's memory for an hour
 *   npm run recover -- --backup-dir DIR --recovery-key FILE --recovery-enc-key FILE [--socket PATH]
 *       loads the recovery encryption key into the enclave (sealed to one of its transport keys)
 *       and restores every DIR/*.backup as it is on disk: the enclave opens each recovery copy,
 *       no wallet key is decrypted in this process
 *   npm run recover -- --package FILE [--package FILE …] --recovery-key FILE [--socket PATH]
 *       restores packages made offline by ops/recovery-reencrypt.ts
 *   npm run recover -- backup-key (--treasury | --settler | --key-ref REF) --admin-key FILE --backup-dir DIR [--socket PATH]
 *       before any loss: backs up a key the refill does not (the faucet treasury's, made by
 *       configure_treasury, or the x402 settler's, made by configure_settler) as an envelope in
 *       DIR, so a recovery brings it back too
 *
 * --recovery-key is the recovery authority (Ed25519), --recovery-enc-key the recovery encryption
 * key (X25519); both are the operator's offline keys. The socket is --socket, else
 * AGENT_SIGNER_SVC_HSM_ENDPOINT, else the local stack's. One line per batch, and for the faucet
 * treasury's and the x402 settler's batches one more per key with its ref and address; exit 0 when every
 * batch was restored (or already was), 1 when one was refused, 2 on bad usage.
 */
import { parseArgs } from "node:util";
import { socketPathOfEndpoint } from "../origin/signer/endpoint.ts";
import { createSocketSignerClient } from "../origin/signer/socket-client.ts";
import { errorMessage } from "../shared/error-message.ts";
import { backupKey, recoverBatches } from "./lib/recovery.ts";
import { readRecoveryKeyFile } from "./recovery-key.ts";

const USAGE = `usage:
  npm run recover -- transport-key [--socket PATH]
  npm run recover -- --backup-dir DIR --recovery-key FILE --recovery-enc-key FILE [--socket PATH]
  npm run recover -- --package FILE [--package FILE …] --recovery-key FILE [--socket PATH]
  npm run recover -- backup-key (--treasury | --settler | --key-ref REF) --admin-key FILE --backup-dir DIR [--socket PATH]
`;

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    strict: true,
    allowPositionals: true,
    options: {
      "backup-dir": { type: "string" },
      package: { type: "string", multiple: true },
      "recovery-key": { type: "string" },
      "recovery-enc-key": { type: "string" },
      socket: { type: "string" },
      treasury: { type: "boolean" },
      settler: { type: "boolean" },
      "key-ref": { type: "string" },
      "admin-key": { type: "string" },
    },
  });
  const endpoint = process.env.AGENT_SIGNER_SVC_HSM_ENDPOINT;
  const socketPath = values.socket ?? (endpoint ? socketPathOfEndpoint(endpoint) : ".data/enclave.sock");
  const packages = values.package ?? [];
  const transportOnly = positionals.length === 1 && positionals[0] === "transport-key";
  const backupOnly =
    positionals.length === 1 &&
    positionals[0] === "backup-key" &&
    [values.treasury, values.settler, values["key-ref"]].filter(Boolean).length === 1 &&
    values["admin-key"] &&
    values["backup-dir"];
  const fromDir = positionals.length === 0 && values["backup-dir"] && values["recovery-enc-key"];
  const fromPackages = positionals.length === 0 && !values["backup-dir"] && packages.length > 0;
  if (!transportOnly && !backupOnly && !((fromDir || fromPackages) && values["recovery-key"])) {
    process.stderr.write(USAGE);
    return 2;
  }
  const signer = createSocketSignerClient({ socketPath });
  try {
    if (transportOnly) {
      const offered = await signer.newTransportKey();
      if (!offered.ok) {
        process.stdout.write(`recover: failed: new_transport_key: ${offered.error.code}\n`);
        return 1;
      }
      process.stdout.write(
        `${JSON.stringify({
          transport_public_key: offered.value.transportPublicKey,
          env_id: offered.value.envId,
          chain_id: offered.value.chainId,
          expires_at: offered.value.expiresAt,
        })}\n`,
      );
      return 0;
    }
    if (backupOnly) return await backupOne(signer, values);
    const results = await recoverBatches({
      signer,
      recoveryAuthority: { keyPath: values["recovery-key"]! },
      source: fromDir
        ? {
            kind: "backup-dir",
            dir: values["backup-dir"]!,
            recoveryEncryptionKey: await readRecoveryKeyFile(values["recovery-enc-key"]!),
          }
        : { kind: "packages", files: packages },
    });
    for (const { file, result } of results) {
      if (!result.ok) {
        process.stdout.write(`recover: ${file}: refused: ${result.error}\n`);
        continue;
      }
      const batch = result.value;
      process.stdout.write(
        `recover: ${file}: batch ${batch.batchId} (${batch.namespace}): ${batch.keys} keys held, ${batch.imported} imported\n`,
      );
      // The treasury and the settler are pointed back at their restored keys by ref (runbook
      // step 4: enclave-policy treasury --faucet-key-ref, settler --settler-key-ref).
      if (batch.namespace === "faucet" || batch.namespace === "settler") {
        for (const key of batch.held) {
          process.stdout.write(
            `recover:   ${batch.namespace} key_ref ${key.keyRef} address ${key.address}\n`,
          );
        }
      }
    }
    const refused = results.filter(({ result }) => !result.ok).length;
    process.stdout.write(`recover: ${results.length - refused} restored, ${refused} refused\n`);
    return refused === 0 ? 0 : 1;
  } finally {
    await signer.close();
  }
}

async function backupOne(
  signer: ReturnType<typeof createSocketSignerClient>,
  values: {
    treasury?: boolean;
    settler?: boolean;
    "key-ref"?: string;
    "admin-key"?: string;
    "backup-dir"?: string;
  },
): Promise<number> {
  let keyRef = values["key-ref"];
  if (values.treasury || values.settler) {
    const sealed = await signer.getPolicy();
    if (!sealed.ok) {
      process.stdout.write(`recover: failed: get_policy: ${sealed.error.code}\n`);
      return 1;
    }
    keyRef = values.treasury ? sealed.value.treasury?.faucetKeyRef : sealed.value.settler?.settlerKeyRef;
    if (!keyRef) {
      process.stdout.write(
        `recover: failed: ${values.treasury ? "no faucet treasury" : "no x402 settler"} is configured\n`,
      );
      return 1;
    }
  }
  const backedUp = await backupKey({
    signer,
    adminAuthority: { keyPath: values["admin-key"]! },
    keyRef: keyRef!,
    backupDir: values["backup-dir"]!,
  });
  if (!backedUp.ok) {
    process.stdout.write(`recover: failed: ${backedUp.error}\n`);
    return 1;
  }
  process.stdout.write(
    `recover: key ${keyRef} (${backedUp.value.namespace}, batch ${backedUp.value.batchId}) backed up and verified: ${backedUp.value.path}\n`,
  );
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`recover: ${errorMessage(error)}\n`);
    process.exit(
      error instanceof Error && "code" in error && String(error.code).startsWith("ERR_PARSE_ARGS") ? 2 : 1,
    );
  },
);
