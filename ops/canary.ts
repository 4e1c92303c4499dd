/**
 * `npm run canary [-- --socket PATH]`: with this node's configuration, proves one key through the
 * live signer client and writes nothing. The enclave is --socket, else AGENT_SIGNER_SVC_HSM_ENDPOINT,
 * else the local stack's socket, as for the other operator tools. Exit 0: verified and configuration
 * matches, safe to switch; 1: no candidate key; 2: do not switch (the line names the mismatch);
 * 64: a usage or configuration error (an unknown flag, an invalid variable), which says nothing
 * about the enclave. One line either way.
 */
import path from "node:path";
import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../origin/config.ts";
import { openDatabase } from "../origin/db/open.ts";
import { CANARY_EXIT, runCanary } from "../origin/identity/canary.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import { errorMessage } from "../shared/error-message.ts";
import { DEFAULT_POLICY_SOCKET } from "./lib/policy-cli-args.ts";

/** EX_USAGE: apart from the canary's own 0, 1 and 2, so a script never reads it as a verdict. */
const EXIT_USAGE = 64;

async function main(): Promise<number> {
  let socket: string | undefined;
  let config: ReturnType<typeof loadConfig>;
  try {
    ({
      values: { socket },
    } = parseArgs({ options: { socket: { type: "string" } }, strict: true }));
    config = loadConfig(process.env);
  } catch (error) {
    if (!(error instanceof ConfigError) && !isParseArgsError(error)) throw error;
    process.stderr.write(
      `canary: usage: ${errorMessage(error)}\n` +
        "usage: npm run canary [-- --socket PATH] (with the node's environment)\n",
    );
    return EXIT_USAGE;
  }
  const endpoint = socket
    ? `unix://${path.resolve(socket)}`
    : (config.signer.endpoint ?? `unix://${path.resolve(DEFAULT_POLICY_SOCKET)}`);
  // The canary exercises the live client whatever the switch says: it decides whether to flip it.
  const signer = createSignerClient({
    endpoint,
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

function isParseArgsError(error: unknown): boolean {
  return error instanceof Error && "code" in error && String(error.code).startsWith("ERR_PARSE_ARGS");
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stdout.write(`canary: do not switch: ${errorMessage(error)}\n`);
    process.exit(CANARY_EXIT.doNotSwitch);
  },
);
