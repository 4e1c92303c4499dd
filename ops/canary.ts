/**
 * `npm run canary [-- --socket PATH]`: with this node's configuration, proves one key through the
 * live signer client and writes nothing. The enclave is --socket, else AGENT_SIGNER_SVC_HSM_ENDPOINT,
 * else the local stack's socket, as for the other operator tools. Its exit code is its verdict, so
 * it keeps its own numbers (docs/operations.md#exit-codes-of-the-operator-tools): 0 verified and
 * configuration matches, safe to switch; 1 no candidate key; 2 do not switch (the line names the
 * mismatch), which an error that stops the probe (the database unreachable) also answers, as
 * inconclusive; 64 a usage or configuration error (an unknown flag, an invalid variable), which
 * says nothing about the enclave. One line either way.
 */
import path from "node:path";
import { parseArgs } from "node:util";
import { openDatabase } from "../origin/db/open.ts";
import { CANARY_EXIT, runCanary } from "../origin/identity/canary.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import { socketPathOfEndpoint } from "../origin/signer/endpoint.ts";
import { type CliContext, type CliOutcome, DONE, refused, runCli } from "./lib/cli-shell.ts";
import { withSocketHint } from "./lib/enclave-unreachable.ts";
import { nodeConfig } from "./lib/node-config.ts";
import { checkSocketFlag, DEFAULT_POLICY_SOCKET } from "./lib/policy-cli-args.ts";

/** EX_USAGE: apart from the canary's own 0, 1 and 2, so a script never reads it as a verdict. */
const EXIT_USAGE = 64;

async function run(argv: string[], { env }: CliContext): Promise<CliOutcome> {
  const {
    values: { socket },
  } = parseArgs({ args: argv, options: { socket: { type: "string" } }, strict: true });
  checkSocketFlag(socket);
  const config = nodeConfig(env);
  const endpoint = socket
    ? `unix://${path.resolve(socket)}`
    : (config.signer.endpoint ?? `unix://${path.resolve(DEFAULT_POLICY_SOCKET)}`);
  // The canary exercises the live client whatever the switch says: it decides whether to flip it.
  // An enclave it cannot reach says where it looked, as for the other operator tools.
  const signer = withSocketHint(
    createSignerClient({
      endpoint,
      liveIdentityEnabled: true,
      requestTimeoutMs: 5_000,
      connectTimeoutMs: 2_000,
    }),
    socketPathOfEndpoint(endpoint),
  );
  const database = await openDatabase(config, 1);
  try {
    const result = await runCanary(database.db, signer, { envId: config.envId });
    process.stdout.write(`${result.line}\n`);
    switch (result.exitCode) {
      case CANARY_EXIT.switch:
        return DONE;
      case CANARY_EXIT.noCandidate:
        return refused();
      case CANARY_EXIT.doNotSwitch:
        // Mapped to 2 below, with the errors that leave the probe inconclusive.
        return { exit: "error" };
    }
  } finally {
    await signer.close();
    await database.close();
  }
}

runCli({
  name: "canary",
  usage: "usage: npm run canary [-- --socket PATH] (with the node's environment)",
  run,
  exitCodes: { refused: CANARY_EXIT.noCandidate, error: CANARY_EXIT.doNotSwitch, usage: EXIT_USAGE },
});
