/**
 * `npm run canary`: with this node's configuration, proves one key through the live signer
 * client and writes nothing. Exit 0: verified and configuration matches, safe to switch;
 * 1: no candidate key; 2: do not switch. One line on stdout either way.
 */
import { loadConfig } from "../origin/config.ts";
import { openDatabase } from "../origin/db/open.ts";
import { CANARY_EXIT, runCanary } from "../origin/identity/canary.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";

async function main(): Promise<number> {
  const config = loadConfig(process.env);
  if (!config.signer.endpoint) {
    process.stdout.write("canary: do not switch: AGENT_SIGNER_SVC_HSM_ENDPOINT is not set\n");
    return CANARY_EXIT.doNotSwitch;
  }
  // The canary exercises the live client whatever the switch says: it decides whether to flip it.
  const signer = createSignerClient({
    endpoint: config.signer.endpoint,
    liveIdentityEnabled: true,
    requestTimeoutMs: 5_000,
    connectTimeoutMs: 2_000,
  });
  const database = await openDatabase(config, 1);
  try {
    const result = await runCanary(database.db, signer, { envId: config.envId });
    process.stdout.write(`${result.line}\n`);
    return result.exitCode;
  } finally {
    await signer.close();
    await database.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stdout.write(
      `canary: do not switch: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(CANARY_EXIT.doNotSwitch);
  },
);
