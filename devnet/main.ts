/**
 * `npm run devnet`: the devnet as a process.
 *
 *   --port N             listen port (default: DEVNET_PORT, else 8545; 0 = any free port)
 *   --host ADDR          listen address (default 127.0.0.1)
 *   --state FILE         load state from FILE if it exists, save it there on exit
 *   --operator-pool ADDR operator-pool address (default: the dev operator pool)
 *
 * Prints one line with the URL on stdout; logs go to stderr. SIGINT or SIGTERM closes it,
 * saving the state file first.
 */
// First: it sets the environment `debug` reads when ethereumjs loads it.
import "./no-debug-colors.ts";
import { parseArgs } from "node:util";
import { errorMessage } from "../shared/error-message.ts";
import { onParentExit } from "../shared/node/parent-exit.ts";
import { ignoreUnreadOutput } from "../shared/node/unread-output.ts";
import { DEFAULT_DEVNET_PORT } from "./constants.ts";
import { createStderrLogger, startDevnet } from "./index.ts";
import { DEVNET_USAGE } from "./usage.ts";

async function main(): Promise<void> {
  // Its output's reader may go first (the launcher that died, a supervisor's log collector): the
  // next log line must not end it before it saves the chain.
  ignoreUnreadOutput();
  const { values } = parseArgs({
    options: {
      port: { type: "string" },
      host: { type: "string" },
      state: { type: "string" },
      "operator-pool": { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${DEVNET_USAGE}\n`);
    return;
  }
  // An empty DEVNET_PORT counts as unset, not as port 0.
  const portText = values.port ?? (process.env.DEVNET_PORT || String(DEFAULT_DEVNET_PORT));
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new Error(`invalid port: ${portText}`);
  const operatorPool = values["operator-pool"];
  if (operatorPool !== undefined && !/^0x[0-9a-fA-F]{40}$/.test(operatorPool)) {
    throw new Error("--operator-pool must be a 20-byte hex address");
  }
  const logger = createStderrLogger();
  const devnet = await startDevnet({
    port,
    host: values.host,
    stateFile: values.state,
    operatorPool: operatorPool as `0x${string}` | undefined,
    logger,
  });
  process.stdout.write(`devnet listening on ${devnet.url}\n`);

  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping");
    devnet.close().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ error: errorMessage(error) }, "failed to stop cleanly");
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
  // Started by the local-stack launcher with an IPC channel: exit with it, never as an orphan.
  onParentExit(() => stop("parent-exit"));
}

main().catch((error: unknown) => {
  process.stderr.write(`devnet: ${errorMessage(error)}\n`);
  process.exit(1);
});
