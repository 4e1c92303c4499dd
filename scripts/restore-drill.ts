/**
 * `npm run restore-drill -- --batch ID --recovery-key FILE`: restores one batch's backup into a
 * scratch namespace of the enclave with a recovery capability minted from the operator's offline
 * recovery key, compares the public keys, and records restore evidence on an exact match.
 * Exit 0 on evidence recorded, 1 on a refused or failed drill, 2 on bad usage.
 */
import { parseArgs } from "node:util";
import { loadConfig } from "../origin/config.ts";
import { openDatabase } from "../origin/db/open.ts";
import { runRestoreDrill } from "../origin/keypool/restore-drill.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { batch: { type: "string" }, "recovery-key": { type: "string" } },
    strict: true,
  });
  if (!values.batch || !/^[0-9a-f-]{36}$/.test(values.batch) || !values["recovery-key"]) {
    process.stderr.write("usage: npm run restore-drill -- --batch BATCH_ID --recovery-key FILE\n");
    return 2;
  }
  const config = loadConfig(process.env);
  if (!config.signer.endpoint) {
    process.stderr.write("restore-drill: AGENT_SIGNER_SVC_HSM_ENDPOINT is not set\n");
    return 2;
  }
  const signer = createSignerClient({ endpoint: config.signer.endpoint, liveIdentityEnabled: true });
  const authorize = createCapabilityMinter({
    authority: { keyPath: values["recovery-key"] },
    envId: config.envId,
    client: signer,
  });
  const database = await openDatabase(config, 1);
  try {
    const result = await runRestoreDrill(database.db, signer, authorize, values.batch);
    if (!result.ok) {
      process.stdout.write(`restore-drill: failed: ${result.reason}\n`);
      return 1;
    }
    process.stdout.write(
      `restore-drill: batch ${result.batchId}: ${result.keys} keys restored into ${result.scratchNamespace} and matched; evidence recorded\n`,
    );
    return 0;
  } finally {
    await signer.close();
    await database.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`restore-drill: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(
      error instanceof Error && "code" in error && String(error.code).startsWith("ERR_PARSE_ARGS") ? 2 : 1,
    );
  },
);
