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
 * happened. Exit 0 when every batch was drilled, 1 when one was refused or failed, 2 on bad usage.
 */
import path from "node:path";
import { parseArgs } from "node:util";
import { loadConfig } from "../origin/config.ts";
import { openDatabase } from "../origin/db/open.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import { errorMessage } from "../shared/error-message.ts";
import { DEFAULT_POLICY_SOCKET } from "./lib/policy-cli-args.ts";
import { createRestoreDriller, pendingDrillBatches } from "./lib/restore-driller.ts";
import { readRecoveryKeyFile } from "./recovery-key.ts";

const USAGE =
  "usage: npm run restore-drill -- (--batch BATCH_ID [--batch BATCH_ID …] | --pending) --recovery-key FILE --recovery-enc-key FILE [--socket PATH]\n" +
  "  --pending           every backed-up batch that has no restore evidence yet (the funding gate holds its wallets)\n" +
  "  --recovery-key      the recovery authority key (Ed25519, ops/enclave-authority.ts)\n" +
  "  --recovery-enc-key  the recovery encryption key (X25519, ops/recovery-key.ts)\n" +
  `  --socket            the live enclave's socket (default: AGENT_SIGNER_SVC_HSM_ENDPOINT, else ${DEFAULT_POLICY_SOCKET})\n`;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      batch: { type: "string", multiple: true },
      "recovery-key": { type: "string" },
      "recovery-enc-key": { type: "string" },
      pending: { type: "boolean" },
      socket: { type: "string" },
    },
    strict: true,
  });
  const named = values.batch ?? [];
  if (
    named.length > 0 === Boolean(values.pending) ||
    named.some((batch) => !/^[0-9a-f-]{36}$/.test(batch)) ||
    !values["recovery-key"] ||
    !values["recovery-enc-key"]
  ) {
    process.stderr.write(USAGE);
    return 2;
  }
  const config = loadConfig(process.env);
  // As the other operator tools (enclave-policy, recover): the local stack's socket by default.
  const endpoint = values.socket
    ? `unix://${path.resolve(values.socket)}`
    : (config.signer.endpoint ?? `unix://${path.resolve(DEFAULT_POLICY_SOCKET)}`);
  const recoveryEncryptionKey = await readRecoveryKeyFile(values["recovery-enc-key"]);
  const live = createSignerClient({ endpoint, liveIdentityEnabled: true });
  const identity = await live.getSealedIdentity();
  await live.close();
  if (!identity.ok) {
    process.stdout.write(`restore-drill: failed: the live enclave's identity: ${identity.error.code}\n`);
    return 1;
  }
  const driller = createRestoreDriller({
    identity: identity.value,
    recoveryAuthority: { keyPath: values["recovery-key"] },
    recoveryEncryptionKey,
  });
  // Ctrl-C or a kill still stops the throwaway enclave and deletes its folder.
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => void driller.close().finally(() => process.exit(130)));
  }
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
      process.stdout.write(
        `restore-drill: batch ${drilled.batchId}: ${drilled.keys} keys restored into a throwaway enclave and matched; ` +
          `key ${drilled.provenKeyRef} signed and verified; evidence recorded\n`,
      );
    }
  } finally {
    await driller.close();
    await database.close();
  }
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`restore-drill: ${errorMessage(error)}\n`);
    process.exit(
      error instanceof Error && "code" in error && String(error.code).startsWith("ERR_PARSE_ARGS") ? 2 : 1,
    );
  },
);
