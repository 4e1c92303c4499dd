/**
 * `npm run restore-drill -- (--batch ID [--batch ID …] | --pending) --recovery-key FILE --recovery-enc-key
 * FILE` (docs/operations.md, "Restore drills"): proves each batch's backup restores without the live enclave;
 * `--pending` drills every backed-up batch with no restore evidence yet. It reads the live enclave's public
 * identity (--socket, else AGENT_SIGNER_SVC_HSM_ENDPOINT, else the local stack's socket), starts a throwaway
 * enclave on a temporary data folder initialised with it, seals the offline recovery encryption key to the
 * throwaway's transport key and loads it there, sends each backup envelope as it is on disk to be
 * opened and restored by the throwaway under a capability of the offline recovery authority key
 * (this process never holds a wallet key in plaintext), compares every key_ref, public key and
 * address with the pool, has one restored key sign an identity proof and verifies it, and records
 * restore evidence. The throwaway enclave is stopped and its folder deleted before exit, whatever
 * happened, a Ctrl-C included. Exit 0 when every batch was drilled, 1 when one was refused or failed,
 * 2 on bad usage, 3 when the live enclave or the database could not be reached, 130 when interrupted
 * (docs/operations.md#exit-codes-of-the-operator-tools).
 */
import path from "node:path";
import { parseArgs } from "node:util";
import { openDatabase } from "../origin/db/open.ts";
import { readAuthoritySecret } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import { socketPathOfEndpoint } from "../origin/signer/endpoint.ts";
import { fromHex, normaliseHex } from "../shared/hex.ts";
import { isUuid } from "../shared/uuid.ts";
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
import { enclaveUnreachable, signerFailureText, withSocketHint } from "./lib/enclave-unreachable.ts";
import { readRecoveryKeyFile } from "./lib/key-files.ts";
import { nodeConfig } from "./lib/node-config.ts";
import { checkSocketFlag, DEFAULT_POLICY_SOCKET } from "./lib/policy-cli-args.ts";
import { createRestoreDriller, pendingDrillBatches } from "./lib/restore-driller.ts";

const USAGE =
  "usage: npm run restore-drill -- (--batch BATCH_ID [--batch BATCH_ID …] | --pending) --recovery-key FILE --recovery-enc-key FILE [--backup-signer HEX …] [--accept-unsigned-backups] [--socket PATH]\n" +
  "  --pending           every backed-up batch that has no restore evidence yet (the funding gate holds its wallets)\n" +
  "  --recovery-key      the recovery authority key (Ed25519, ops/enclave-authority.ts)\n" +
  "  --recovery-enc-key  the recovery encryption key (X25519, ops/recovery-key.ts)\n" +
  "  --backup-signer     another key a backup may be signed by, beside the live enclave's: a lost enclave's, for the batches it made (repeatable)\n" +
  "  --accept-unsigned-backups  drill unsigned (v2) backups made before backups were signed, with a warning each\n" +
  `  --socket            the live enclave's socket (default: AGENT_SIGNER_SVC_HSM_ENDPOINT, else ${DEFAULT_POLICY_SOCKET})\n`;

async function run(argv: string[], { env, onInterrupt }: CliContext): Promise<CliOutcome> {
  const { values } = parseArgs({
    args: argv,
    options: {
      batch: { type: "string", multiple: true },
      "recovery-key": { type: "string" },
      "recovery-enc-key": { type: "string" },
      pending: { type: "boolean" },
      "backup-signer": { type: "string", multiple: true },
      "accept-unsigned-backups": { type: "boolean" },
      socket: { type: "string" },
    },
    strict: true,
  });
  const named = values.batch ?? [];
  if (
    named.length > 0 === Boolean(values.pending) ||
    named.some((batch) => !isUuid(batch)) ||
    !values["recovery-key"] ||
    !values["recovery-enc-key"]
  ) {
    throw new UsageError("give --batch ID (a UUID, repeatable) or --pending, not both, and both keys");
  }
  checkSocketFlag(values.socket);
  const namedSigners = (values["backup-signer"] ?? []).map(parseBackupSigner);
  const config = nodeConfig(env);
  // As the other operator tools (enclave-policy, recover): the local stack's socket by default.
  const endpoint = values.socket
    ? `unix://${path.resolve(values.socket)}`
    : (config.signer.endpoint ?? `unix://${path.resolve(DEFAULT_POLICY_SOCKET)}`);
  // Read before anything starts: a key file that cannot be read is a usage error.
  const recoveryAuthority = await readArgumentFile(
    "--recovery-key",
    values["recovery-key"],
    "a 32-byte hex seed",
    readAuthoritySecret,
  );
  const recoveryEncryptionKey = await readArgumentFile(
    "--recovery-enc-key",
    values["recovery-enc-key"],
    "a 32-byte hex key",
    readRecoveryKeyFile,
  );
  const live = withSocketHint(
    createSignerClient({ endpoint, liveIdentityEnabled: true }),
    socketPathOfEndpoint(endpoint),
  );
  const identity = await live.getSealedIdentity();
  await live.close();
  if (!identity.ok) {
    const what = `the live enclave's identity: ${signerFailureText("get_sealed_identity", identity.error)}`;
    if (enclaveUnreachable(identity.error)) return errored(what);
    process.stdout.write(`restore-drill: failed: ${what}\n`);
    return refused();
  }
  const driller = createRestoreDriller({
    identity: identity.value,
    recoveryAuthority,
    recoveryEncryptionKey,
    signers: {
      // Added to the live enclave's, never in its place: after a recovery, --pending holds batches
      // of both generations, and a drill told only the lost enclave's signer failed every batch
      // the successor made since.
      expected: [fromHex(identity.value.backupSigner), ...namedSigners],
      acceptUnsigned: values["accept-unsigned-backups"] === true,
    },
  });
  // Ctrl-C or a kill still stops the throwaway enclave and deletes its folder.
  onInterrupt(() => driller.close());
  const database = await openDatabase(config, 1);
  let failed = 0;
  try {
    const batches = values.pending ? await pendingDrillBatches(database.db) : named;
    if (values.pending) {
      process.stdout.write(
        batches.length === 0
          ? "restore-drill: every backed-up batch has restore evidence; nothing to drill\n"
          : `restore-drill: ${batches.length} batch(es) without restore evidence\n`,
      );
    }
    for (const batchId of batches) {
      const result = await driller.drill(database.db, batchId);
      if (!result.ok) {
        failed += 1;
        process.stdout.write(`restore-drill: batch ${batchId}: failed: ${result.error}\n`);
        continue;
      }
      const drilled = result.value;
      if (drilled.unsignedFile) {
        process.stdout.write(
          `restore-drill: batch ${drilled.batchId}: warning: ${drilled.unsignedFile} is an unsigned envelope (v2), drilled without a signer check (--accept-unsigned-backups)\n`,
        );
      }
      process.stdout.write(
        `restore-drill: batch ${drilled.batchId}: ${drilled.keys} keys restored into a throwaway enclave and matched; ` +
          `key ${drilled.provenKeyRef} signed and verified; evidence recorded\n`,
      );
    }
  } finally {
    await driller.close();
    await database.close();
  }
  return failed === 0 ? DONE : refused();
}

/** A backup signer's public key: 32 bytes of hex, with or without 0x. */
function parseBackupSigner(value: string): Uint8Array {
  try {
    return fromHex(normaliseHex(value, 32));
  } catch {
    throw new UsageError(
      "--backup-signer must be a 32-byte Ed25519 public key in hex (backup_signer of the init record)",
    );
  }
}

runCli({ name: "restore-drill", usage: USAGE, run });
