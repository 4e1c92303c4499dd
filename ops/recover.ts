/**
 * `npm run recover`: brings a new enclave back to holding every backed-up key.
 *
 *   npm run recover -- transport-key [--socket PATH]
 *       prints a fresh transport key of the enclave (for an air-gapped re-encryption with
 *       ops/recovery-reencrypt.ts); it lives in the enclave's memory for an hour
 *   npm run recover -- backup-signer [--socket PATH]
 *       prints the public key of the enclave's backup signer (also in its init record): keep it
 *       with the recovery keys, a recovery names it with --backup-signer
 *   npm run recover -- --backup-dir DIR --recovery-key FILE --recovery-enc-key FILE
 *                      (--backup-signer HEX [--backup-signer HEX …] [--accept-unsigned-backups] | --accept-unsigned-backups) [--socket PATH]
 *       loads the recovery encryption key into the enclave (sealed to one of its transport keys)
 *       and restores every DIR/*.backup as it is on disk: the enclave opens each recovery copy,
 *       no wallet key is decrypted in this process. Only envelopes signed by the lost enclave's
 *       backup signer (--backup-signer) are restored, or by the signer of an earlier enclave a
 *       recovery replaced, named with another --backup-signer (its batches are in the folder too,
 *       signed by it): the folder lives on the origin host, and anyone holding the public
 *       recovery key can make an envelope of keys they know. Unsigned
 *       (v2) envelopes, made before backups were signed, only with --accept-unsigned-backups,
 *       with a warning each
 *   npm run recover -- --package FILE [--package FILE …] --recovery-key FILE [--socket PATH]
 *       restores packages made offline by ops/recovery-reencrypt.ts
 *   npm run recover -- backup-key (--treasury | --settler | --payee | --key-ref REF) --admin-key FILE --backup-dir DIR [--socket PATH]
 *       before any loss: backs up a key the refill does not (the faucet treasury's, made by
 *       configure_treasury, the x402 settler's, made by configure_settler, or the x402 payee's,
 *       made at init) as an envelope in DIR, so a recovery brings it back too
 *
 * --recovery-key is the recovery authority (Ed25519), --recovery-enc-key the recovery encryption
 * key (X25519); both are the operator's offline keys. The socket is --socket, else
 * AGENT_SIGNER_SVC_HSM_ENDPOINT, else the local stack's. One line per batch, and for the faucet
 * treasury's, the x402 settler's and the x402 payee's batches one more per key with its ref and address; exit 0 when every
 * batch was restored (or already was), 1 when one was refused, 2 on bad usage, 3 when the enclave
 * could not be reached (docs/operations.md#exit-codes-of-the-operator-tools).
 */
import { parseArgs } from "node:util";
import { readAuthoritySecret } from "../origin/signer/capability-minter.ts";
import type { SignerClient } from "../origin/signer/types.ts";
import { keyRefSchema } from "../shared/enclave-ops.ts";
import { fromHex, normaliseHex } from "../shared/hex.ts";
import {
  type CliContext,
  type CliOutcome,
  DONE,
  errored,
  readArgumentFile,
  refused,
  runCli,
  UsageError,
} from "./lib/cli-shell.ts";
import { enclaveUnreachable, operatorSignerClient, signerFailureText } from "./lib/enclave-unreachable.ts";
import { readRecoveryKeyFile } from "./lib/key-files.ts";
import { enclaveSocketPath } from "./lib/policy-cli-args.ts";
import { backupFilesIn, backupKey, type FileRecovery, recoverBatches } from "./lib/recovery.ts";

const USAGE = `usage:
  npm run recover -- transport-key [--socket PATH]
  npm run recover -- backup-signer [--socket PATH]
  npm run recover -- --backup-dir DIR --recovery-key FILE --recovery-enc-key FILE (--backup-signer HEX [--backup-signer HEX …] | --accept-unsigned-backups) [--socket PATH]
  npm run recover -- --package FILE [--package FILE …] --recovery-key FILE [--socket PATH]
  npm run recover -- backup-key (--treasury | --settler | --payee | --key-ref REF) --admin-key FILE --backup-dir DIR [--socket PATH]
`;

async function run(argv: string[], { env }: CliContext): Promise<CliOutcome> {
  const { values, positionals } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: true,
    options: {
      "backup-dir": { type: "string" },
      package: { type: "string", multiple: true },
      "recovery-key": { type: "string" },
      "recovery-enc-key": { type: "string" },
      // Repeatable: a folder holds the backups of every enclave the node had, each signed by its own.
      "backup-signer": { type: "string", multiple: true },
      "accept-unsigned-backups": { type: "boolean" },
      socket: { type: "string" },
      treasury: { type: "boolean" },
      settler: { type: "boolean" },
      payee: { type: "boolean" },
      "key-ref": { type: "string" },
      "admin-key": { type: "string" },
    },
  });
  // An endpoint that is no unix:// path is the environment's mistake: a usage error (exit 2), as
  // for the other tools that reach the enclave.
  const socketPath = enclaveSocketPath(values.socket, env.AGENT_SIGNER_SVC_HSM_ENDPOINT);
  const packages = values.package ?? [];
  const transportOnly = positionals.length === 1 && positionals[0] === "transport-key";
  const signerOnly = positionals.length === 1 && positionals[0] === "backup-signer";
  const backupOnly =
    positionals.length === 1 &&
    positionals[0] === "backup-key" &&
    [values.treasury, values.settler, values.payee, values["key-ref"]].filter(Boolean).length === 1 &&
    values["admin-key"] &&
    values["backup-dir"];
  const fromDir = positionals.length === 0 && values["backup-dir"] && values["recovery-enc-key"];
  const fromPackages = positionals.length === 0 && !values["backup-dir"] && packages.length > 0;
  if (
    !transportOnly &&
    !signerOnly &&
    !backupOnly &&
    !((fromDir || fromPackages) && values["recovery-key"])
  ) {
    throw new UsageError("give one of the forms below");
  }
  if (values["key-ref"] !== undefined && !keyRefSchema.safeParse(values["key-ref"]).success) {
    throw new UsageError("--key-ref must be a key_ref (64 hex digits), as enclave-policy show prints it");
  }
  // A flag of another form is refused, not passed over: --package beside --backup-dir would
  // otherwise restore the folder alone and report it done.
  const [form, takes] = transportOnly
    ? ["transport-key", ["socket"]]
    : signerOnly
      ? ["backup-signer", ["socket"]]
      : backupOnly
        ? ["backup-key", ["treasury", "settler", "payee", "key-ref", "admin-key", "backup-dir", "socket"]]
        : fromDir
          ? [
              "--backup-dir",
              [
                "backup-dir",
                "recovery-key",
                "recovery-enc-key",
                "backup-signer",
                "accept-unsigned-backups",
                "socket",
              ],
            ]
          : ["--package", ["package", "recovery-key", "socket"]];
  const extra = Object.keys(values).filter((name) => !takes.includes(name));
  if (extra.length > 0) {
    throw new UsageError(`${form} takes no ${extra.map((name) => `--${name}`).join(", ")}`);
  }
  if (fromDir && (values["backup-signer"] ?? []).length === 0 && !values["accept-unsigned-backups"]) {
    throw new UsageError(
      "--backup-dir needs --backup-signer HEX (the lost enclave's, from its init record or `recover -- backup-signer`; one more for each earlier enclave a recovery replaced), or --accept-unsigned-backups",
    );
  }
  const backupSigners = (values["backup-signer"] ?? []).map(parseBackupSigner);
  // Read before the enclave is asked anything: a key file that cannot be read is a usage error.
  const restoring = !transportOnly && !signerOnly && !backupOnly;
  const recoveryAuthority = restoring
    ? await readArgumentFile(
        "--recovery-key",
        values["recovery-key"]!,
        "a 32-byte hex seed",
        readAuthoritySecret,
      )
    : undefined;
  const recoveryEncryptionKey =
    restoring && fromDir
      ? await readArgumentFile(
          "--recovery-enc-key",
          values["recovery-enc-key"]!,
          "a 32-byte hex key",
          readRecoveryKeyFile,
        )
      : undefined;
  // A folder with no backup in it is the wrong folder: restoring nothing must not read as done.
  if (restoring && fromDir) {
    const dir = values["backup-dir"]!;
    const backups = await readArgumentFile("--backup-dir", dir, "a folder", backupFilesIn);
    if (backups.length === 0) throw new UsageError(`--backup-dir ${dir} holds no backup (*.backup)`);
  }
  const adminAuthority = backupOnly
    ? await readArgumentFile("--admin-key", values["admin-key"]!, "a 32-byte hex seed", readAuthoritySecret)
    : undefined;
  const signer = operatorSignerClient(socketPath);
  try {
    if (transportOnly) {
      const offered = await signer.newTransportKey();
      if (!offered.ok) {
        if (enclaveUnreachable(offered.error))
          return errored(signerFailureText("new_transport_key", offered.error));
        process.stdout.write(`recover: failed: ${signerFailureText("new_transport_key", offered.error)}\n`);
        return refused();
      }
      process.stdout.write(
        `${JSON.stringify({
          transport_public_key: offered.value.transportPublicKey,
          env_id: offered.value.envId,
          chain_id: offered.value.chainId,
          expires_at: offered.value.expiresAt,
        })}\n`,
      );
      return DONE;
    }
    if (signerOnly) {
      const identity = await signer.getSealedIdentity();
      if (!identity.ok) {
        if (enclaveUnreachable(identity.error))
          return errored(signerFailureText("get_sealed_identity", identity.error));
        process.stdout.write(
          `recover: failed: ${signerFailureText("get_sealed_identity", identity.error)}\n`,
        );
        return refused();
      }
      process.stdout.write(
        `${JSON.stringify({ backup_signer: identity.value.backupSigner, env_id: identity.value.envId })}\n`,
      );
      return DONE;
    }
    if (backupOnly) return await backupOne(signer, { ...values, adminAuthority: adminAuthority! });
    const results = await recoverBatches({
      signer,
      recoveryAuthority: recoveryAuthority!,
      source: fromDir
        ? {
            kind: "backup-dir",
            dir: values["backup-dir"]!,
            recoveryEncryptionKey: recoveryEncryptionKey!,
            signers: { expected: backupSigners, acceptUnsigned: values["accept-unsigned-backups"] === true },
          }
        : { kind: "packages", files: packages },
      onFile: printRecovery,
    });
    const refusals = results.filter(({ result }) => !result.ok).length;
    process.stdout.write(`recover: ${results.length - refusals} restored, ${refusals} refused\n`);
    return refusals === 0 ? DONE : refused();
  } finally {
    await signer.close();
  }
}

/** One line a file, as it is done (and the restored treasury, settler and payee keys' refs). */
function printRecovery({ file, result }: FileRecovery): void {
  if (!result.ok) {
    process.stdout.write(`recover: ${file}: refused: ${result.error}\n`);
    return;
  }
  const batch = result.value;
  if (batch.unsigned) {
    process.stdout.write(
      `recover: ${file}: warning: unsigned envelope (v2) restored without a signer check (--accept-unsigned-backups)\n`,
    );
  }
  process.stdout.write(
    `recover: ${file}: batch ${batch.batchId} (${batch.namespace}): ${batch.keys} keys held, ${batch.imported} imported\n`,
  );
  // The treasury, the settler and the payee are pointed back at their restored keys by ref
  // (runbook step 4: enclave-policy treasury --faucet-key-ref, settler --settler-key-ref,
  // payee --payee-key-ref).
  if (batch.namespace === "faucet" || batch.namespace === "settler" || batch.namespace === "payee") {
    for (const key of batch.held) {
      process.stdout.write(`recover:   ${batch.namespace} key_ref ${key.keyRef} address ${key.address}\n`);
    }
  }
}

/** A backup signer's public key: 32 bytes of hex, with or without 0x. */
function parseBackupSigner(value: string): Uint8Array {
  try {
    return fromHex(normaliseHex(value, 32));
  } catch {
    throw new UsageError(
      "--backup-signer must be the 32-byte Ed25519 public key in hex (backup_signer of the init record)",
    );
  }
}

async function backupOne(
  signer: SignerClient,
  values: {
    treasury?: boolean;
    settler?: boolean;
    payee?: boolean;
    "key-ref"?: string;
    "backup-dir"?: string;
    adminAuthority: Uint8Array;
  },
): Promise<CliOutcome> {
  let keyRef = values["key-ref"];
  if (values.treasury || values.settler || values.payee) {
    const sealed = await signer.getPolicy();
    if (!sealed.ok) {
      if (enclaveUnreachable(sealed.error)) return errored(signerFailureText("get_policy", sealed.error));
      process.stdout.write(`recover: failed: ${signerFailureText("get_policy", sealed.error)}\n`);
      return refused();
    }
    keyRef = values.treasury
      ? sealed.value.treasury?.faucetKeyRef
      : values.settler
        ? sealed.value.settler?.settlerKeyRef
        : (sealed.value.payee ?? undefined)?.payeeKeyRef;
    if (!keyRef) {
      const missing = values.treasury
        ? "no faucet treasury"
        : values.settler
          ? "no x402 settler"
          : "no x402 payee";
      process.stdout.write(`recover: failed: ${missing} is configured\n`);
      return refused();
    }
  }
  const backedUp = await backupKey({
    signer,
    adminAuthority: values.adminAuthority,
    keyRef: keyRef!,
    backupDir: values["backup-dir"]!,
  });
  if (!backedUp.ok) {
    if (backedUp.error.unreachable) return errored(backedUp.error.message);
    process.stdout.write(`recover: failed: ${backedUp.error.message}\n`);
    return refused();
  }
  process.stdout.write(
    `recover: key ${keyRef} (${backedUp.value.namespace}, batch ${backedUp.value.batchId}) backed up and verified: ${backedUp.value.path}\n`,
  );
  return DONE;
}

runCli({ name: "recover", usage: USAGE, run });
