/**
 * `npm run enclave`: the signer enclave process (docs/enclave.md). `init` creates the sealing key and the
 * sealed config; serve (default) listens until SIGTERM or SIGINT, then removes its socket.
 */

import { rm } from "node:fs/promises";
import { errorMessage } from "../shared/error-message.ts";
import { onParentExit } from "../shared/node/parent-exit.ts";
import { releaseLog } from "../shared/node/unread-output.ts";
import { parseEnclaveArgs, USAGE } from "./cli-args.ts";
import { InitError, initEnclave } from "./init.ts";
import { createEnclaveLogger } from "./logger.ts";
import { EnclaveStartError, startEnclaveServer } from "./server.ts";

async function main(): Promise<number> {
  let command: ReturnType<typeof parseEnclaveArgs>;
  try {
    command = parseEnclaveArgs(process.argv.slice(2), process.env);
  } catch (error) {
    process.stderr.write(`${errorMessage(error)}\n${USAGE}\n`);
    return 64;
  }
  if (command.command === "help") {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (command.command === "init") {
    try {
      const config = await initEnclave(command);
      // The record a recovery starts from (docs/operations.md "Disaster recovery"): all of it public.
      process.stdout.write(
        `${JSON.stringify({
          initialised: command.dataDir,
          env_id: config.env_id,
          chain_id: config.chain_id,
          instance_id: config.instance_id,
          admin_authority: config.admin_authority,
          policy_authority: config.policy_authority,
          recovery_authority: config.recovery_authority,
          recovery_encryption_key: config.recovery_encryption_key,
          payee_address: config.payee_address,
          backup_signer: config.backup_signer,
        })}\n`,
      );
      return 0;
    } catch (error) {
      if (!(error instanceof InitError)) throw error;
      process.stderr.write(`enclave init: ${error.message}\n`);
      return 2;
    }
  }
  const logger = createEnclaveLogger(command.logLevel);
  let server: Awaited<ReturnType<typeof startEnclaveServer>>;
  try {
    server = await startEnclaveServer({
      socketPath: command.socketPath,
      dataDir: command.dataDir,
      announcedProfile: command.announcedProfile,
      socketMode: command.socketMode,
      verifyStateJournal: command.verifyStateJournal,
      logger,
    });
  } catch (error) {
    if (!(error instanceof EnclaveStartError)) throw error;
    logger.fatal(error.message);
    await releaseLog(logger);
    return 2;
  }
  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      logger.info({ signal }, "shutting down");
      resolve();
    };
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
    // Started with an IPC channel (the local-stack launcher, the restore drill): exit with it.
    onParentExit(() => stop("parent-exit"));
  });
  await server.close();
  if (command.throwaway) {
    // The restore drill's enclave: its folder holds the sealing key beside the key sets it restored,
    // together the wallets' private keys. Deleted here as well as by the drill, which a kill can
    // stop before its own cleanup (docs/operations.md#restore-drills).
    await rm(command.dataDir, { recursive: true, force: true });
    logger.info({ data_dir: command.dataDir }, "throwaway data folder deleted");
  }
  await releaseLog(logger);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`enclave: ${errorMessage(error)}\n`);
    process.exit(1);
  },
);
